"""The benchmark families' pages: each is one `FamilyPage` declaration, registered once with
`register(...)` (the four shipped pages at the end of their own modules in
`dashboards/pages/`, which `discover()` imports when the app is ready; a test or plugin may
register one at any time). Everything else follows from the registry:

- the routes: `/<slug>/` (and a sub-page's `/<slug>/<path>/`) under its URL names, and a
  generic route that serves a family registered after the URLconf was loaded
  (`FamilyConverter` matches only registered paths, so any other path is still "no page");
- the nav (`{% family_nav %}` in base.html), in `order`;
- a job's link to its family's page (`job_link`, the hook `benchsite.links` calls);
- a benchmark's headline metric and what its Series columns mean (`dashboards.filters`).

This module imports no page, form or model: the pages import it."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from django.urls import reverse

if TYPE_CHECKING:
    from dashboards.render import Page

    Builder = Callable[..., Page]

GENERIC_ROUTE = "dashboards:family"  # the route that serves every registered path


@dataclass(frozen=True)
class SubPage:
    """Another page of a family under its slug (`/compilers/models/`)."""

    path: str  # under the family's slug: "models"
    url_name: str  # "compiler-models" (dashboards:compiler-models)
    build: Builder


@dataclass(frozen=True)
class FamilyPage:
    """A benchmark family's dashboard page, as the site shows and links it.

    `build(state) -> Page` reads the URL's state, usually through `filters` (the page's
    Filters form: its chain of choices); without `build` the generic page
    (`dashboards.pages.family.build`) shows `columns` of one commit with `filters`."""

    family: str  # runner.families' NAME: a job's `family`
    benchmark: str  # benchmark.name of its records
    slug: str  # the URL's path: /<slug>/
    label: str  # in the nav
    headline: str  # the metric its pages lead with
    template: str = "dashboards/family.html"
    url_name: str = ""  # the route's name, "dashboards:<url_name>"; default the slug
    build: Builder | None = None
    filters: type | None = None  # the Filters form; None where the page reads state itself
    columns: Mapping[str, str] = field(default_factory=dict)  # metric -> title, table order
    by_commit: bool = False  # opened at one commit by ?repo=&branch=&sha=
    labels: Mapping[str, str] = field(default_factory=dict)  # Series column -> its meaning
    subpages: tuple[SubPage, ...] = ()
    order: int = 100  # place in the nav

    @property
    def name(self) -> str:
        return self.url_name or self.slug

    def url(self, **query: Any) -> str:
        """The page's URL, with the query's non-empty values."""
        path = reverse(GENERIC_ROUTE, kwargs={"where": self.slug})
        shown = {key: value for key, value in query.items() if value not in (None, "")}
        return f"{path}?{urlencode(shown)}" if shown else path


@dataclass(frozen=True)
class Served:
    """What one path of the registry serves: a family page or one of its sub-pages."""

    page: FamilyPage
    build: Builder | None
    url_name: str


_PAGES: dict[str, FamilyPage] = {}  # family -> its page, in registration order


def register(page: FamilyPage) -> FamilyPage:
    """Add (or replace) a family's page; its slug must not be another family's."""
    taken = {other.slug: other.family for other in _PAGES.values()}
    if taken.get(page.slug, page.family) != page.family:
        raise ValueError(f"/{page.slug}/ is already {taken[page.slug]!r}'s page")
    _PAGES[page.family] = page
    return page


def unregister(family: str) -> None:
    _PAGES.pop(family, None)


def pages() -> list[FamilyPage]:
    """Every registered page, in nav order."""
    return sorted(_PAGES.values(), key=lambda page: page.order)


def page_of(family: str) -> FamilyPage | None:
    return _PAGES.get(family)


def for_benchmark(benchmark: str) -> FamilyPage | None:
    return next((page for page in _PAGES.values() if page.benchmark == benchmark), None)


def served() -> dict[str, Served]:
    """Path under the site's root (without slashes) -> what it serves."""
    paths: dict[str, Served] = {}
    for page in _PAGES.values():
        paths[page.slug] = Served(page, page.build, page.name)
        for sub in page.subpages:
            paths[f"{page.slug}/{sub.path}"] = Served(page, sub.build, sub.url_name)
    return paths


def job_link(family: str, commit: dict[str, str]) -> str:
    """The link to a family's page at a commit (`commit`: repo, branch, sha and other
    filters), or at its repo where the page cannot be opened at one commit; "" for a family
    without a page. `benchsite.links.family_page_url` (a job's link) asks this."""
    page = page_of(family)
    if page is None:
        return ""
    return page.url(**commit) if page.by_commit else page.url(repo=commit["repo"])


class FamilyConverter:
    """A path segment (or two: a sub-page) that the registry serves now; any other path
    does not match the route, so it is "no page" as before."""

    regex = r"[-\w]+(?:/[-\w]+)?"

    def to_python(self, value: str) -> str:
        if value not in served():
            raise ValueError(value)
        return value

    def to_url(self, value: str) -> str:
        return value


def discover() -> None:
    """Import every module of dashboards.pages: a family page registers where it is built."""
    package = importlib.import_module("dashboards.pages")  # the pages import this module
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"dashboards.pages.{module.name}")
