"""`POST /api/v3/results`: one HTTP call uploads a CI job's records."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from isal import isal_zlib
from rest_framework import status
from rest_framework.response import Response

from benchsite.body_limits import content_length, too_large
from benchsite.results.ingest import UploadRefused, store_upload
from benchsite.results.models import Upload
from benchsite.results.tokens import BearerTokenAuthentication, HasUploadToken
from runner.contract.record import RUN_FIELDS

KEY_LENGTH = Upload._meta.get_field("idempotency_key").max_length


class PayloadTooLarge(Exception):
    pass


class LengthRequired(Exception):
    pass


def read_body(request, limit: int) -> bytes:
    """The request body, at most `limit` bytes (PayloadTooLarge beyond; a Content-Length over
    it is refused before, by `body_limits`). Django reads a body without Content-Length as
    empty; a chunked one (`Transfer-Encoding: chunked`) is read from the WSGI input, which a
    server that decodes the chunks (gunicorn) ends after the last one
    (`wsgi.input_terminated`); elsewhere it is LengthRequired."""
    chunked = "chunked" in request.headers.get("Transfer-Encoding", "").lower()
    length = content_length(request)
    if not chunked or length is not None:
        if length is not None and length > limit:
            raise PayloadTooLarge
        return request.read()  # what Content-Length says, once (not request.body's limit)
    if not request.META.get("wsgi.input_terminated"):
        raise LengthRequired
    stream, parts, size = request.META["wsgi.input"], [], 0
    while part := stream.read(min(2**20, limit + 1 - size)):
        parts.append(part)
        size += len(part)
        if size > limit:
            raise PayloadTooLarge
    return b"".join(parts)


class NotGzip(ValueError):
    pass


GZIP_MAGIC = b"\x1f\x8b"


def gunzip(data: bytes, limit: int) -> bytes:
    """Decompress at most `limit` bytes, so a small gzip bomb cannot exhaust memory. Every
    member of the stream (`cat a.gz b.gz` is one gzip stream of two), not the first alone;
    zero bytes padding its end are ignored. ISA-L (python-isal) reads a CI job's 2.5 MB
    upload in 0.4 ms, zlib in 1.3."""
    if not data.startswith(GZIP_MAGIC):
        raise NotGzip("no gzip header")
    parts: list[bytes] = []
    size = 0
    while data:
        decompressor = isal_zlib.decompressobj(wbits=isal_zlib.MAX_WBITS | 16)
        try:
            part = decompressor.decompress(data, limit + 1 - size)
        except isal_zlib.error as error:
            raise NotGzip(str(error)) from None
        size += len(part)
        if size > limit or decompressor.unconsumed_tail:
            raise PayloadTooLarge
        if not decompressor.eof:
            raise NotGzip("truncated gzip stream")
        parts.append(part)
        data = decompressor.unused_data.lstrip(b"\0")
    return parts[0] if len(parts) == 1 else b"".join(parts)


class UploadResultsMixin:
    """POST on the results collection. Authenticated by a token with the upload scope only,
    so a browser session can never upload (and CSRF does not apply); the body is read raw."""

    parser_classes: list = []
    body_limit_setting = "BENCH_UPLOAD_MAX_BYTES"  # benchsite.body_limits

    def get_authenticators(self):
        # the schema generator asks before it has a request
        if getattr(self.request, "method", None) == "POST":
            return [BearerTokenAuthentication()]
        return super().get_authenticators()

    def get_permissions(self):
        if self.request.method == "POST":
            return [HasUploadToken()]
        return super().get_permissions()

    @extend_schema(
        operation_id="upload_results",
        summary="Upload PyTorch OSS benchmark (v3) records",
        description=(
            "Body: a JSON list of records, one record, JSON Lines, or an envelope "
            '`{"metadata": {...}, "records": [...]}`; `Content-Encoding: gzip` accepted. '
            "Run metadata missing from a record comes from the envelope, then from the query "
            "parameters. All-or-nothing; 400 lists every problem by record index and field "
            "path. Idempotent: a repeat (same Idempotency-Key, or same content) returns the "
            "first upload with 200 (keys are the token's own: two tokens may use the same "
            "key); a key reused with other content is a 409. The token's repos are checked "
            "before a repeat is answered."
        ),
        request={"application/json": OpenApiTypes.OBJECT},
        parameters=[
            OpenApiParameter("Idempotency-Key", OpenApiTypes.STR, OpenApiParameter.HEADER),
            *(OpenApiParameter(name, OpenApiTypes.STR) for name in RUN_FIELDS),
        ],
        responses={
            201: OpenApiResponse(OpenApiTypes.OBJECT, description="stored"),
            200: OpenApiResponse(OpenApiTypes.OBJECT, description="a repeat, already stored"),
            400: OpenApiResponse(OpenApiTypes.OBJECT, description="invalid: nothing stored"),
            401: OpenApiResponse(description="no or unknown token"),
            403: OpenApiResponse(description="the token has no upload scope, or may not "
                                             "upload for a repo"),
            409: OpenApiResponse(description="Idempotency-Key reused with other content"),
            411: OpenApiResponse(description="chunked, and the server cannot end the body"),
            413: OpenApiResponse(description="over the size limit"),
        },
    )
    def post(self, request):
        limit = settings.BENCH_UPLOAD_MAX_BYTES
        key = request.headers.get("Idempotency-Key") or None
        if key is not None and (len(key) > KEY_LENGTH or not key.isprintable()):
            return Response({"errors": [
                f"Idempotency-Key: expected at most {KEY_LENGTH} printable characters, got "
                f"{len(key)} characters{'' if key.isprintable() else ' with control ones'}"]},
                status=400)
        try:
            raw = read_body(request, limit)
        except PayloadTooLarge:
            return too_large(limit)
        except LengthRequired:
            return Response({"errors": ["body: chunked without a server that ends it; send "
                                        "Content-Length"]},
                            status=status.HTTP_411_LENGTH_REQUIRED)
        encoding = request.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding == "gzip":
            try:
                body = gunzip(raw, limit)
            except PayloadTooLarge:
                return too_large(limit)
            except NotGzip as error:
                return Response({"errors": [f"body: not valid gzip: {error}"]}, status=400)
            payload_gzip = raw
        elif encoding == "identity":
            body, payload_gzip = raw, None
        else:
            return Response(
                {"errors": [f"Content-Encoding: {encoding!r} is not supported; use gzip"]},
                status=status.HTTP_415_UNSUPPORTED_MEDIA_TYPE,
            )
        metadata = {name: request.query_params[name] for name in RUN_FIELDS
                    if request.query_params.get(name)}
        try:
            stored = store_upload(
                body,
                metadata=metadata,
                token=request.auth,
                idempotency_key=key,
                payload_gzip=payload_gzip,
            )
        except UploadRefused as refused:
            return Response(
                {"errors": refused.errors, "error_count": refused.count},
                status=refused.status,
            )
        return Response(
            {"upload_id": stored.upload.pk, "records": stored.upload.record_count,
             "created": stored.created},
            status=status.HTTP_201_CREATED if stored.created else status.HTTP_200_OK,
        )
