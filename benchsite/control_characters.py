"""A NUL or another control character in the path or the query string is a 400, whichever
page or API endpoint it is sent to.

No page or endpoint has a use for them, and they break deep down: PostgreSQL refuses a NUL
in a string (a DataError, so a 500), and the OS refuses it in a file name (static files).
One check before anything reads the request, instead of one at each place that would fail.
"""

from __future__ import annotations

import re

from django.http import HttpRequest, HttpResponse

from dashboards import errors
from dashboards.state import BadParameter

CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class RefuseControlCharacters:
    """The site's own 400 page, or its JSON for the API and ?format=json."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if CONTROL.search(request.path_info):
            return errors.bad_address(request)
        for name, values in request.GET.lists():
            if CONTROL.search(name) or any(CONTROL.search(value) for value in values):
                return errors.bad_parameter(request, BadParameter(
                    name, "contains a control character (such as NUL)"))
        return self.get_response(request)
