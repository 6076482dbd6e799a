"""Links to the site's pages, one function per kind of page, for the layers below the pages
(models' get_absolute_url, notifications, the admin): the one place that names their routes.
A shared utility: it imports no app.

A family's dashboard page is the dashboards' own to say (their registry,
dashboards.families): the dashboards app hands its answer in when it is ready
(`serve_family_pages`); without it a family has no page ("")."""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urlencode

from django.urls import reverse

# (family, {"repo", "branch", "sha", and other filters}) -> the URL of the family's page
# at that commit (or only the repo's, where the page cannot be opened at one), or "".
FamilyPageLink = Callable[[str, dict[str, str]], str]
_family_page: FamilyPageLink | None = None


def serve_family_pages(link: FamilyPageLink | None) -> None:
    """Called by the dashboards app once its family pages are registered."""
    global _family_page  # the one hook, filled in at startup
    _family_page = link


def family_page_url(family: str, repo: str, branch: str = "", sha: str = "",
                    **filters: str) -> str:
    """The dashboard page of a benchmark family, at one commit (and `filters`, such as
    `arch`) where the page can be opened at one; "" when no page shows the family."""
    if _family_page is None:
        return ""
    return _family_page(family, {"repo": repo, "branch": branch, "sha": sha, **filters})


def _with_query(path: str, query: dict[str, object]) -> str:
    shown = {key: value for key, value in query.items() if value not in (None, "")}
    return f"{path}?{urlencode(shown)}" if shown else path


def job_url(pk: int) -> str:
    return reverse("jobs:detail", args=[pk])


def bisect_url(pk: int) -> str:
    return reverse("dashboards:bisect", args=[pk])


def regression_url(pk: int) -> str:
    return reverse("regressions:detail", args=[pk])


def group_url(pk: int) -> str:
    """An alert group's page."""
    return reverse("regressions:group", args=[pk])


def report_url(pk: int) -> str:
    """A nightly report's page."""
    return reverse("regressions:report", args=[pk])


def regressions_url(**query: object) -> str:
    """The regressions list, filtered by `query`."""
    return _with_query(reverse("regressions:list"), query)


def trends_url(**query: object) -> str:
    """The trends page, filtered by `query`."""
    return _with_query(reverse("dashboards:trends"), query)


def compare_url(base: str, head: str, **query: object) -> str:
    """The comparison page of two commits."""
    return _with_query(reverse("dashboards:compare", kwargs={"base": base, "head": head}),
                       query)
