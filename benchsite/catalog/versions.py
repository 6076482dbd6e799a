"""Config versions: every change is recorded with who made it and when; restoring an old
version records a new one, so history is never rewritten."""

from __future__ import annotations

from django.db import transaction
from django.db.models import Max

from benchsite.catalog.models import BenchmarkConfig, ConfigVersion

VERSIONED = ("description", "spec_yaml", "timing")


def record(config: BenchmarkConfig, user=None, note: str = "") -> ConfigVersion | None:
    """A new version of the saved config when its content differs from the latest one."""
    with transaction.atomic():
        BenchmarkConfig.objects.select_for_update().get(pk=config.pk)  # one writer at a time
        latest = config.versions.first()
        if latest and all(getattr(latest, key) == getattr(config, key) for key in VERSIONED):
            return None
        number = (config.versions.aggregate(n=Max("number"))["n"] or 0) + 1
        return ConfigVersion.objects.create(
            config=config, number=number, created_by=user, note=note,
            **{key: getattr(config, key) for key in VERSIONED})


def restore(version: ConfigVersion, user=None) -> ConfigVersion | None:
    """Put the version's content back into its config, as a new version."""
    config = version.config
    for key in VERSIONED:
        setattr(config, key, getattr(version, key))
    config.updated_by = user
    config.save()
    return record(config, user, note=f"restored version {version.number}")
