"""What admins allow: the modules whose code a job spec may name, and the repos a staff
user may see in the admin's raw uploads and mint upload tokens for."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models

from runner.contract.repos import RepoNameError, check_patterns, covers, grants

# The runner's own modules are always allowed: they are the code the workers run anyway.
BUILTIN_MODULES = ("runner",)
MODULE_NAME = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def check_module_name(value: str) -> None:
    if not MODULE_NAME.match(value):
        raise ValidationError(f"{value!r} is not a module name such as 'mypackage.models'")


def check_provided_module(value: str) -> None:
    """A module a project's checkout provides: a module name, and never the standard
    library's (no checkout provides `os`; allowing it would allow `os:system`)."""
    check_module_name(value)
    if value.partition(".")[0] in sys.stdlib_module_names:
        raise ValidationError(f"{value!r} is in Python's standard library, not a project's")


# Other apps allow the modules that records of their own provide (bisects: the packages of
# the sources registered for bisection), through a function that lists (module, why) pairs
# and is registered from their AppConfig.ready(): the list follows those records as they are
# made, renamed and deleted, and rows made here by admins stay as they are.
ModuleProvider = Callable[[], Iterable[tuple[str, str]]]
_providers: dict[str, ModuleProvider] = {}


def provide_allowed_modules(name: str, provider: ModuleProvider) -> None:
    """Register (or replace) the provider called `name`."""
    _providers[name] = provider


class AllowedCodeModule(models.Model):
    """A module (and its submodules) whose functions job specs may name as
    `module:function` (model factories, compiler backends); nothing else is imported."""

    module = models.CharField(max_length=200, unique=True, validators=[check_module_name],
                              help_text="e.g. 'mypackage.models': it and its submodules")
    note = models.CharField(max_length=200, blank=True, help_text="why it is trusted")
    added_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                 editable=False, on_delete=models.SET_NULL)
    added_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["module"]

    def __str__(self) -> str:
        return self.module

    @staticmethod
    def provided() -> dict[str, list[str]]:
        """The modules other apps' records allow (provide_allowed_modules) -> why."""
        provided: dict[str, list[str]] = {}
        for provider in _providers.values():
            for module, why in provider():
                provided.setdefault(module, []).append(why)
        return provided

    @staticmethod
    def refused(references: list[str]) -> list[str]:
        """The `module:function` references whose module is not allowed: neither the
        runner's own, nor an admin's row, nor provided by another app's records."""
        allowed = (*BUILTIN_MODULES,
                   *AllowedCodeModule.objects.values_list("module", flat=True),
                   *AllowedCodeModule.provided())
        return [ref for ref in references
                if not any(ref.partition(":")[0] == module
                           or ref.partition(":")[0].startswith(module + ".")
                           for module in allowed)]


class RepoScope(models.Model):
    """A staff user's repos: those they may see raw uploads of, and those they may mint
    upload tokens for (superusers: all of both)."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="repo_scope")
    repos = models.JSONField(default=list,
                             help_text="'owner/name' or patterns like 'owner/*', one a line")
    upload_repos = models.JSONField(
        default=list, blank=True,
        help_text="the repos they may mint upload tokens for (OWNER/NAME, OWNER/* or *, one "
                  "a line): a token's repos must each be covered by one of these")

    def __str__(self) -> str:
        return f"{self.user}: {', '.join(self.repos)}"

    def clean(self) -> None:
        problems = {}
        for field in ("repos", "upload_repos"):
            try:
                check_patterns(getattr(self, field), field)
            except RepoNameError as error:
                problems[field] = str(error)
        if problems:
            raise ValidationError(problems)

    @staticmethod
    def allows(user, repos: list[str]) -> bool:
        """Whether `user` may see everything of these repos."""
        if user.is_superuser:
            return True
        scope = RepoScope.objects.filter(user=user).first()
        patterns = scope.repos if scope else []
        return all(any(grants(pattern, repo) for pattern in patterns) for repo in repos)

    @staticmethod
    def ungrantable(user, patterns: list[str]) -> list[str]:
        """The repo patterns `user` may not give a token: those none of their own
        `upload_repos` covers (a user mints no token that uploads where they may not)."""
        if user.is_superuser:
            return []
        scope = RepoScope.objects.filter(user=user).first()
        held = scope.upload_repos if scope else []
        return [wanted for wanted in patterns
                if not any(covers(pattern, wanted) for pattern in held)]
