"""BENCH_LOGIN_REQUIRED: every page needs a logged-in user allowed to view dashboards.

The admin and login pages have their own login; the API keeps its own authentication
(upload tokens, sessions), so CI uploads and queries are unaffected. Only the session's
user counts here: an upload token sent as a header logs nobody in.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.views import redirect_to_login
from django.shortcuts import render

from benchsite.access.roles import VIEW_DASHBOARDS


class SiteLoginMiddleware:
    """Not Django 5.2's LoginRequiredMiddleware: off unless BENCH_LOGIN_REQUIRED, and the
    dashboards also need the viewers role."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if settings.BENCH_LOGIN_REQUIRED and not request.path_info.startswith(
                tuple(settings.BENCH_LOGIN_EXEMPT)):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not request.user.has_perm(VIEW_DASHBOARDS):
                return render(request, "access/forbidden.html", status=403)
        return self.get_response(request)
