"""Every HTML page is a builder, `build(state, **url_kwargs) -> Page`, served by `_page` as
HTML, JSON (`?format=json`) or one of its tables as CSV (`?format=csv&table=NAME`). A
value a page cannot use is reset with a note on the HTML page (`State.fallback`) and answers
400 naming it for JSON and CSV (`dashboards.errors`). Forms that change something (triage)
are POST views that redirect back to their page."""

from functools import partial

from django.http import Http404
from django.views.decorators.http import require_POST

from dashboards import errors, families
from dashboards.pages import (
    bisects,
    compare,
    explorer,
    family,
    home,
    jobs,
    recipes,
    regressions,
    reports,
    runs,
    trends,
)
from dashboards.render import respond
from dashboards.state import BadParameter, State


def _page(builder, template):
    def view(request, **kwargs):
        state = State(request)
        try:
            page = builder(state, **kwargs)
        except BadParameter as error:
            return errors.bad_parameter(request, error)
        page.context.setdefault("state", state)
        return respond(request, template, page)

    return errors.json_not_found(view)


def family_page(request, where: str):
    """A registered family's page, or one of its sub-pages (`where`: "slug[/path]"): its
    own builder, else the generic family page."""
    served = families.served().get(where)
    if served is None:  # unregistered since the URL was resolved
        raise Http404(f"There is no page at {request.path}: check the address.")
    build = served.build or partial(family.build, page=served.page)
    return _page(build, served.page.template)(request)


trends_page = _page(trends.build, "dashboards/trends.html")
explorer_page = _page(explorer.build, "dashboards/explorer.html")
run_page = _page(runs.build, "dashboards/run.html")
home_page = _page(home.build, "dashboards/home.html")
compare_page = _page(compare.build, "dashboards/compare.html")
compare_latest = errors.json_not_found(compare.latest)
recipes_page = _page(recipes.build, "dashboards/recipes.html")
jobs_page = _page(jobs.build_list, "dashboards/jobs.html")
job_page = _page(jobs.build_detail, "dashboards/job.html")
regressions_page = _page(regressions.build_list, "dashboards/regressions.html")
regression_page = _page(regressions.build_detail, "dashboards/regression.html")
regression_triage = require_POST(regressions.triage)
group_page = _page(regressions.build_group, "dashboards/group.html")
group_triage = require_POST(regressions.group_triage)
bulk_triage = require_POST(regressions.bulk_triage)
reports_page = _page(reports.build_list, "dashboards/reports.html")
bisects_page = _page(bisects.build_list, "dashboards/bisects.html")
bisect_page = _page(bisects.build_detail, "dashboards/bisect.html")
regression_bisect = require_POST(bisects.start_for_regression)
group_bisect = require_POST(bisects.start_for_group)
report_page = errors.json_not_found(
    reports.formats(_page(reports.build_detail, "dashboards/report.html")))
