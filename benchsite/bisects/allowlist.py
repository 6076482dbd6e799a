"""The packages of the sources registered for bisection are allowed code modules: a job spec
may name their functions (`module:function`) while the source exists. Read from the sources
at each check (benchsite.access.models.provide_allowed_modules), so making, renaming or
deleting a source changes exactly its own entries; the admin's rows are never touched."""

from __future__ import annotations

from benchsite.access.models import provide_allowed_modules
from benchsite.bisects.models import Source, split_modules


def source_modules() -> list[tuple[str, str]]:
    """(module, why) for every module a source declares."""
    return [(module, f"source {name!r}")
            for name, modules in Source.objects.exclude(modules="").values_list("name", "modules")
            for module in split_modules(modules)]


def connect() -> None:
    """From BisectsConfig.ready()."""
    provide_allowed_modules("bisects.sources", source_modules)
