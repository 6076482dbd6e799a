"""Roles as Django groups, each a fixed set of model permissions.

viewers see the dashboards (when BENCH_LOGIN_REQUIRED); maintainers manage recipes, configs,
jobs and their schedules (admin access also needs the user's "staff status"); uploaders
manage upload tokens, which are API credentials and never log anyone in.
"""

from __future__ import annotations

CRUD = ("add", "change", "delete", "view")
VIEW_DASHBOARDS = "results.view_result"  # what BENCH_LOGIN_REQUIRED asks of a user


def _all(app: str, *models: str) -> list[str]:
    return [f"{app}.{action}_{model}" for model in models for action in CRUD]


VIEWERS = ["results.view_result", "results.view_run", "results.view_series"]
ROLES: dict[str, list[str]] = {
    "viewers": VIEWERS,
    "maintainers": [
        *VIEWERS,
        *_all("catalog", "recipe", "benchmarkconfig"),
        "catalog.view_configversion",  # versions are only ever added, by saving a config
        *_all("jobs", "job"),
        "jobs.view_jobcell",
        *_all("django_celery_beat", "periodictask", "crontabschedule"),
    ],
    "uploaders": ["results.add_uploadtoken", "results.view_uploadtoken"],
}
