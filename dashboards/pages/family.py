"""What the family pages share: their filters' chain (repo -> branch -> device -> commits of
the family's benchmark) and the generic page of a family that declares no builder of its
own (`FamilyPage.build` None): its `columns` at one commit, one row per model."""

from __future__ import annotations

from django.urls import reverse

from benchsite.results.models import Result
from dashboards.choices import slice_options
from dashboards.families import FamilyPage
from dashboards.filters import (
    BranchAndDevice,
    Filters,
    choice,
    commit_choices,
    pairs,
    prefer,
)
from dashboards.pages.common import latest_shas, page_url
from dashboards.render import Page, Table
from dashboards.state import State
from runner.contract.status import OK, STATUS_METRIC


class FamilyFilters(BranchAndDevice, Filters):
    """Repo (REPO by default, where it has results of BENCHMARK) -> branch -> device; a page
    adds its commits (`commits`) and its own filters after them."""

    BENCHMARK = ""  # the page's benchmark; "" where the form has a `benchmark` field
    REPO = ""

    repo = choice("Repo")
    branch = choice("Branch")
    arch = choice("Device")
    parents = {"branch": ("repo",), "arch": ("repo", "branch")}

    def options_repo(self, values):
        return pairs(slice_options(("repo",), benchmark=self.BENCHMARK)["repo"])

    def default_repo(self, values, choices):
        return prefer(choices, self.REPO)

    def commits(self, values, when: str = "%Y-%m-%d") -> list[tuple]:
        """The device's latest commits with results of the benchmark as choices, newest
        first; kept as `shas` ((sha, time) pairs) for the filters after it."""
        self.shas = latest_shas(values["repo"], self.benchmark_of(values), values["branch"],
                                arch=values["arch"])
        return commit_choices(self.shas, when)


class CommitFilters(FamilyFilters):
    """... -> one commit (`sha`, default the newest)."""

    sha = choice("Commit")
    parents = {**FamilyFilters.parents, "sha": ("repo", "branch", "arch")}

    def options_sha(self, values):
        return self.commits(values)


def filters_of(page: FamilyPage) -> type[Filters]:
    """The page's filters: its own form, else one commit of its benchmark."""
    if page.filters is not None:
        return page.filters
    return type(f"{page.family.title()}Filters", (CommitFilters,),
                {"BENCHMARK": page.benchmark, "__module__": __name__})


def build(state: State, page: FamilyPage) -> Page:
    """The family's `columns` at one commit and device, a row per model; a model that did
    not run shows its status record's reason."""
    form = filters_of(page)(state)
    repo, sha, arch = (form.values[name] for name in ("repo", "sha", "arch"))
    found: dict[str, dict] = {}
    results = (Result.objects.of_commit(repo, sha)
               .in_slice(benchmark=page.benchmark, arch=arch,
                         metric=[*page.columns, STATUS_METRIC])
               .order_by("timestamp", "id")
               .values_list("series__model", "series__metric", "value", "string_values"))
    for model, metric, value, strings in results:
        measured = found.setdefault(model, {})
        measured[metric] = (strings or [""])[0] if metric == STATUS_METRIC else value
    table = Table("models", ["model", *page.columns.values(), "status"], [])
    explorer = reverse("dashboards:explorer")
    for model in sorted(found):
        measured = found[model]
        table.rows.append([model, *(measured.get(metric) for metric in page.columns),
                           measured.get(STATUS_METRIC) or OK])
        table.links.append({"model": page_url(explorer, repo=repo, benchmark=page.benchmark,
                                              model=model, arch=arch, range="90d")})
    table.paged(state)
    return Page(title=page.label, filters=dict(state.values), tables=[table],
                context={"form": form, "missing": not found, "family": page})
