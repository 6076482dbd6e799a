"""The HTML pages' routes. The jobs, regressions and recipes pages keep the URL namespaces
their models' get_absolute_url and the templates name ("jobs:detail", "regressions:list",
"catalog:recipes"): benchsite.urls mounts each list under its prefix and namespace.

The family pages come from their registry (dashboards.families): each page registered when
the URLconf loads has a route under its own name ("dashboards:quantization"), and the
generic route ("dashboards:family", `/<slug>/`) serves every registered page, including
one registered later; it matches nothing else."""

from django.urls import path, re_path, register_converter

from dashboards import families, views

app_name = "dashboards"
register_converter(families.FamilyConverter, "family")

urlpatterns = [
    *(path(f"{where}/", views.family_page, {"where": where}, name=served.url_name)
      for where, served in families.served().items()),
    path("trends/", views.trends_page, name="trends"),
    path("explorer/", views.explorer_page, name="explorer"),
    path("runs/<int:pk>/", views.run_page, name="run"),
    path("bisects/", views.bisects_page, name="bisects"),
    path("bisects/<int:pk>/", views.bisect_page, name="bisect"),
    path("compare/", views.compare_latest, name="compare-latest"),
    re_path(r"^compare/(?P<base>[^/.]+)\.\.\.(?P<head>[^/.]+)/?$", views.compare_page,
            name="compare"),
    path("<family:where>/", views.family_page, name="family"),
    path("", views.home_page, name="home"),
]

jobs = [
    path("", views.jobs_page, name="list"),
    path("<int:pk>/", views.job_page, name="detail"),
]

regressions = [
    path("", views.regressions_page, name="list"),
    path("<int:pk>/", views.regression_page, name="detail"),
    path("<int:pk>/triage", views.regression_triage, name="triage"),
    path("<int:pk>/bisect", views.regression_bisect, name="bisect"),
    path("triage", views.bulk_triage, name="bulk-triage"),
    path("groups/<int:pk>/", views.group_page, name="group"),
    path("groups/<int:pk>/triage", views.group_triage, name="group-triage"),
    path("groups/<int:pk>/bisect", views.group_bisect, name="group-bisect"),
    path("reports/", views.reports_page, name="reports"),
    path("reports/<int:pk>/", views.report_page, name="report"),
]

recipes = [
    path("", views.recipes_page, name="recipes"),
]
