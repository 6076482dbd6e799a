"""Every HTML page is a builder, `build(state, **url_kwargs) -> Page`, served by `_page` as
HTML, JSON (`?format=json`) or one of its tables as CSV (`?format=csv&table=NAME`). A
value a page cannot use is reset with a note on the HTML page (`State.fallback`) and answers
400 naming it for JSON and CSV (`dashboards.errors`). Forms that change something (triage)
are POST views that redirect back to their page."""

from django.views.decorators.http import require_POST

from dashboards import errors
from dashboards.pages import (
    bisects,
    compare,
    compilers,
    explorer,
    home,
    instructions,
    jobs,
    kernels,
    quantization,
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


quantization_page = _page(quantization.build, "dashboards/quantization.html")
kernels_page = _page(kernels.build, "dashboards/kernels.html")
instructions_page = _page(instructions.build, "dashboards/instructions.html")
trends_page = _page(trends.build, "dashboards/trends.html")
explorer_page = _page(explorer.build, "dashboards/explorer.html")
run_page = _page(runs.build, "dashboards/run.html")
home_page = _page(home.build, "dashboards/home.html")
compare_page = _page(compare.build, "dashboards/compare.html")
compare_latest = errors.json_not_found(compare.latest)
compilers_page = _page(compilers.build, "dashboards/compilers.html")
compiler_models_page = _page(compilers.build_models, "dashboards/compilers.html")
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
bisect_page = _page(bisects.build_detail, "dashboards/bisect.html")
regression_bisect = require_POST(bisects.start_for_regression)
group_bisect = require_POST(bisects.start_for_group)
report_page = errors.json_not_found(
    reports.formats(_page(reports.build_detail, "dashboards/report.html")))
