"""`Authorization: Bearer <token>` for the upload API."""

from __future__ import annotations

from datetime import timedelta

from django.contrib.auth.models import AnonymousUser
from django.db.models import Q
from django.utils import timezone
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from rest_framework import authentication, exceptions, permissions

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
            .only("id", "repos", "name")
            .first()
        )
        if token is None:
            raise exceptions.AuthenticationFailed("unknown or revoked upload token")
        # At most one write a minute: a write per request would cost a commit per upload.
        now = timezone.now()
        UploadToken.objects.filter(pk=token.pk).filter(
            Q(last_used_at__isnull=True) | Q(last_used_at__lt=now - timedelta(minutes=1))
        ).update(last_used_at=now)
        return AnonymousUser(), token

    def authenticate_header(self, request):
        return self.keyword


class HasUploadToken(permissions.BasePermission):
    message = "an upload token is required: send 'Authorization: Bearer <token>'"

    def has_permission(self, request, view):
        return isinstance(request.auth, UploadToken)


class BearerTokenScheme(OpenApiAuthenticationExtension):
    target_class = BearerTokenAuthentication
    name = "uploadToken"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer",
                "description": "an upload token from the admin or create_upload_token"}
