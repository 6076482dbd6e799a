from django.http import JsonResponse
from django.shortcuts import render

from dashboards.pages import (
    compare,
    compilers,
    explorer,
    home,
    instructions,
    kernels,
    quantization,
    runs,
    trends,
)
from dashboards.render import respond
from dashboards.state import BadParameter, State


def _page(builder, template):
    def view(request, **kwargs):
        state = State(request.GET)
        try:
            page = builder(state, **kwargs)
        except BadParameter as error:
            if request.GET.get("format") in ("json", "csv"):
                return JsonResponse({"error": str(error)}, status=400)
            return render(request, "dashboards/error.html", {"error": str(error)}, status=400)
        page.context.setdefault("state", state)
        return respond(request, template, page)

    return view


quantization_page = _page(quantization.build, "dashboards/quantization.html")
kernels_page = _page(kernels.build, "dashboards/kernels.html")
instructions_page = _page(instructions.build, "dashboards/instructions.html")
trends_page = _page(trends.build, "dashboards/trends.html")
explorer_page = _page(explorer.build, "dashboards/explorer.html")
run_page = _page(runs.build, "dashboards/run.html")
home_page = _page(home.build, "dashboards/home.html")
compare_page = _page(compare.build, "dashboards/compare.html")
compilers_page = _page(compilers.build, "dashboards/compilers.html")
compiler_models_page = _page(compilers.build_models, "dashboards/compilers.html")
