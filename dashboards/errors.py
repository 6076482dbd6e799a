"""The site's error pages (handler400, handler404, handler500 in benchsite.urls): what went
wrong and what to change, with a link to the page's default view; `?format=json` (and the
API's paths) get the same as JSON. Django shows its own technical pages instead while DEBUG
is on."""

from __future__ import annotations

from functools import wraps

from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.template import loader
from django.urls import Resolver404, resolve, reverse

from dashboards.state import MACHINE_FORMATS, BadParameter

# A page of one thing -> what it is, and the page listing its kind (its default view).
LISTS = {
    "dashboards:run": ("run", "the latest runs", "dashboards:home"),
    "dashboards:compare": ("comparison", "the latest runs", "dashboards:home"),
    "jobs:detail": ("job", "all jobs", "jobs:list"),
    "regressions:detail": ("regression", "all regressions", "regressions:list"),
    "regressions:group": ("alert group", "all regressions", "regressions:list"),
    "regressions:report": ("report", "all reports", "regressions:reports"),
    "dashboards:bisect": ("bisect", "all regressions", "regressions:list"),
}
HOME = ("the home page", "dashboards:home")


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """400: a parameter the page cannot use (named, with the page's URL without it) or a
    request Django refused."""
    if isinstance(exception, BadParameter):
        return bad_parameter(request, exception)
    return _answer(request, 400, "Bad request",
                   str(exception) if exception else "The request could not be read.",
                   [_default_view(request)])


def bad_address(request: HttpRequest) -> HttpResponse:
    """400: a path no page could have (a control character such as NUL in it)."""
    return _answer(request, 400, "Bad request",
                   f"The address {request.path!r} contains a control character (such as "
                   "NUL): check it.", [_home_link()])


def bad_parameter(request: HttpRequest, error: BadParameter) -> HttpResponse:
    """A parameter the page refused: its name and problem, the same page without it and
    the page's default view."""
    query = request.GET.copy()
    query.pop(error.name, None)
    query.pop("format", None)
    links = [(f"this page without {error.name}", f"{request.path}?{query.urlencode()}"),
             ("this page's default view", request.path)]
    return _answer(request, 400, "Bad request", str(error), links,
                   {"parameter": error.name})


def not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    """404: no page at this path, or the run, job, regression... it names is not stored."""
    try:
        match = resolve(request.path_info)
    except Resolver404:
        return _answer(request, 404, "Not found",
                       f"There is no page at {request.path}: check the address.",
                       [_home_link()])
    kind, label, route = LISTS.get(match.view_name, (None, *HOME))
    said = exception.args[0] if isinstance(exception, Http404) and exception.args else ""
    if kind and "pk" in match.kwargs:
        message = f"There is no {kind} {match.kwargs['pk']}: it was never stored or has " \
                  "been deleted."
    else:
        message = str(said) if isinstance(said, str) and said else (
            f"Nothing was found at {request.path}.")
    links = [(label, reverse(route))]
    if route != HOME[1]:
        links.append(_home_link())
    return _answer(request, 404, "Not found", message, links)


def json_not_found(view):
    """`view`, whose Http404 (a missing run, job, regression...) answers as `not_found`'s
    JSON when `?format=json` (or csv) is asked, DEBUG or not: Django's DEBUG page for a 404
    is HTML whatever was asked. Without it the 404 goes on to Django as before."""

    @wraps(view)
    def answer(request, *args, **kwargs):
        try:
            return view(request, *args, **kwargs)
        except Http404 as error:
            if not _wants_json(request):
                raise
            return not_found(request, error)

    return answer


def server_error(request: HttpRequest) -> HttpResponse:
    """500: rendered without the request's context (the database may be what failed)."""
    message = ("The server failed to answer this request; it has been logged. Try again, "
               "or go back to the page's default view.")
    if _wants_json(request):
        return JsonResponse({"error": message, "status": 500}, status=500)
    html = loader.render_to_string("dashboards/error.html", {
        "title": "Server error", "error": message, "links": [_home_link()]})
    return HttpResponse(html, status=500)


def _home_link() -> tuple[str, str]:
    return HOME[0], reverse(HOME[1])


def _default_view(request: HttpRequest) -> tuple[str, str]:
    return "this page's default view", request.path


def _wants_json(request: HttpRequest) -> bool:
    """JSON and CSV readers, and the API's clients, get the error as JSON."""
    return request.GET.get("format") in MACHINE_FORMATS or request.path.startswith("/api/")


def _answer(request: HttpRequest, status: int, title: str, message: str,
            links: list[tuple[str, str]], extra: dict | None = None) -> HttpResponse:
    if _wants_json(request):
        return JsonResponse({"error": message, "status": status, **(extra or {}),
                             "links": [{"text": text, "url": url} for text, url in links]},
                            status=status)
    html = loader.render_to_string("dashboards/error.html", {
        "title": title, "error": message, "links": links, **(extra or {})}, request)
    return HttpResponse(html, status=status)
