"""A bounded cost per request: a body larger than its view's limit is refused with 413 before
anything reads it (no parser, authentication or form ever sees it).

Django reads no more of a body than its Content-Length says, and nothing of one without it,
so checking Content-Length bounds what every parser reads. The limit is setting
DATA_UPLOAD_MAX_MEMORY_SIZE (BENCH_REQUEST_MAX_BYTES: job and bisect submissions, forms),
or the setting a view names in `body_limit_setting` (the upload API, which also counts
chunked and decompressed bodies itself).
"""

from __future__ import annotations

from django.conf import settings
from django.http import JsonResponse

DEFAULT_SETTING = "DATA_UPLOAD_MAX_MEMORY_SIZE"


def too_large(limit: int) -> JsonResponse:
    """The 413 answer: short, naming the limit, never echoing the body."""
    return JsonResponse(
        {"errors": [f"body: larger than the limit of {limit} bytes ({limit / 2**20:.3g} MiB, "
                    "counted before and after decompression); split or shorten it"],
         "limit_bytes": limit},
        status=413,
    )


def content_length(request) -> int | None:
    try:
        return int(request.META.get("CONTENT_LENGTH") or "")
    except ValueError:
        return None


class LimitRequestBodies:
    """Refuses a request whose Content-Length is over its view's limit (see the module)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_view(self, request, view_func, view_args, view_kwargs):
        length = content_length(request)
        if length is None:
            return None
        view_class = getattr(view_func, "view_class", None)
        limit = getattr(settings, getattr(view_class, "body_limit_setting", DEFAULT_SETTING))
        if limit is not None and length > limit:
            return too_large(limit)
        return None
