"""/favicon.ico, which browsers and tools ask for whatever a page's <link rel="icon"> says:
the static file the base template links, answered at the site's root."""

from pathlib import Path

from django.contrib.staticfiles import finders
from django.http import HttpRequest, HttpResponse

ICON = "benchsite/favicon.ico"


def favicon(request: HttpRequest) -> HttpResponse:
    response = HttpResponse(Path(finders.find(ICON)).read_bytes(), content_type="image/x-icon")
    response["Cache-Control"] = "public, max-age=86400"
    return response
