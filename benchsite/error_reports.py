"""What an error report (Django's technical 500 page while DEBUG is on, or a report mailed or
logged with its details) may show: no password, key or token, DEBUG or not.

Django's own filter hides settings and headers named like a secret (PASSWORD, KEY, TOKEN...)
but shows DATABASE_URL, CELERY_BROKER_URL and the environment as they are, with the
password inside the URL, and every local variable as it is. This one also masks the
password of a URL (scheme://user:PASSWORD@host) or of a libpq connection string
(password=...) in any text, and treats local variables as it treats settings.
"""

from __future__ import annotations

import re
from typing import Any

from django.views.debug import SafeExceptionReporterFilter

# scheme://user:PASSWORD@host: the password runs to the last "@" before the path.
URL_PASSWORD = re.compile(r"(\b[a-z][a-z0-9+.-]*://[^/\s:@]*:)[^/\s]*?(@[^@/\s]*(?:[/\s]|$))",
                          re.IGNORECASE)
CONNINFO_PASSWORD = re.compile(r"(\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'|[^\s'\"]+)",
                               re.IGNORECASE)


def mask_passwords(text: str, substitute: str) -> str:
    text = URL_PASSWORD.sub(lambda match: match[1] + substitute + match[2], text)
    return CONNINFO_PASSWORD.sub(lambda match: match[1] + substitute, text)


class SecretsFilter(SafeExceptionReporterFilter):
    """DEFAULT_EXCEPTION_REPORTER_FILTER: Django's, plus passwords in text, everywhere."""

    def is_active(self, request) -> bool:
        """Django's filter turns itself off while DEBUG is on: this one never does."""
        return True

    def cleanse_setting(self, key, value):
        """Settings and request headers (META, with the environment under a WSGI server);
        Django's recursion into dicts, lists and tuples comes back through here."""
        cleansed = super().cleanse_setting(key, value)
        if isinstance(cleansed, str):  # or a lazy string
            masked = mask_passwords(str(cleansed), self.cleansed_substitute)
            return cleansed if masked == cleansed else masked
        return cleansed

    def get_traceback_frame_variables(self, request, tb_frame) -> list[tuple[str, Any]]:
        """Each local as a setting: masked if named like a secret (password, key, token...),
        and so are the secret-named keys of its dicts and the passwords in its text."""
        return [(name, self.cleanse_setting(name, value))
                for name, value in super().get_traceback_frame_variables(request, tb_frame)]
