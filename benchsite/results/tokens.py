"""`Authorization: Bearer <token>` for the API, and who may do what with it.

A token does what its scopes say (`UploadToken.Scope`): upload results for its repos, submit
jobs on its queues, read. With BENCH_LOGIN_REQUIRED every API endpoint also needs a
session of a user who may view the dashboards, or a token with the read or upload scope.
"""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db.models import Q
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

from benchsite.access.roles import VIEW_DASHBOARDS
from benchsite.results.models import UploadToken


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """Sets `request.auth` to the UploadToken; a token is never a user and cannot log in."""

    keyword = "Bearer"

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1").split()
        if not header or header[0] != self.keyword:
            return None
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("Authorization: expected 'Bearer <token>'")
        token = (
            UploadToken.objects.filter(digest=UploadToken.hash(header[1]), is_active=True)
            .only("id", "repos", "name", "scopes", "queues", "last_used_at")
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("unknown or revoked upload token")
        # At most one write a minute: a write per request would cost a commit per upload
        # (and the statement is only sent when the time read with the token is that old).
        now = timezone.now()
        stale = now - timedelta(minutes=1)
        if token.last_used_at is None or token.last_used_at < stale:
            UploadToken.objects.filter(pk=token.pk).filter(
                Q(last_used_at__isnull=True) | Q(last_used_at__lt=stale)
            ).update(last_used_at=now)
        return AnonymousUser(), token

    def authenticate_header(self, request):
        return self.keyword


def token_of(request) -> UploadToken | None:
    return request.auth if isinstance(request.auth, UploadToken) else None


class HasUploadToken(permissions.BasePermission):
    """A token with the upload scope (the repos are checked against the records)."""

    def has_permission(self, request, view):
        token = token_of(request)
        if token is None:
            raise exceptions.NotAuthenticated(
                "an upload token is required: send 'Authorization: Bearer <token>'")
        if not token.can(UploadToken.Scope.UPLOAD):
            raise exceptions.PermissionDenied(
                f"token {token.name!r} has no 'upload' scope (its scopes: {token.scopes})")
        return True


READ_SCOPES = (UploadToken.Scope.READ, UploadToken.Scope.UPLOAD)


class SiteApiAccess(permissions.BasePermission):
    """BENCH_LOGIN_REQUIRED for the API. Reads need a user who may view the dashboards or a
    token with the read or upload scope; writes need a token or a logged-in user, and the
    view's own permission then decides. Without the setting, anyone may read."""

    def has_permission(self, request, view):
        if not settings.BENCH_LOGIN_REQUIRED:
            return True
        token = token_of(request)
        if request.method not in permissions.SAFE_METHODS:
            return token is not None or request.user.is_authenticated
        if token is not None:
            if any(token.can(scope) for scope in READ_SCOPES):
                return True
            raise exceptions.PermissionDenied(
                f"token {token.name!r} may not read: it needs the 'read' or 'upload' scope "
                f"(its scopes: {token.scopes})")
        if request.user.is_authenticated and not request.user.has_perm(VIEW_DASHBOARDS):
            raise exceptions.PermissionDenied(
                "this site requires the viewers role (BENCH_LOGIN_REQUIRED)")
        return request.user.is_authenticated


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = BearerTokenAuthentication
    name = "uploadToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "an API token from the admin or create_upload_token; it does "
                               "what its scopes say: upload, submit_jobs (on its queues), "
                               "read"}
