"""The OpenAPI schema's security requirements follow BENCH_LOGIN_REQUIRED: reads are open
(an empty requirement) only on a site without it."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular import openapi
from rest_framework import permissions

from benchsite.results.tokens import SiteApiAccess


class AutoSchema(openapi.AutoSchema):
    def get_auth(self):
        auths = super().get_auth()
        open_read = (not settings.BENCH_LOGIN_REQUIRED and self.method in permissions.SAFE_METHODS
                     and any(isinstance(permission, SiteApiAccess)
                             for permission in self.view.get_permissions()))
        if open_read and {} not in auths:
            auths.append({})
        return auths
