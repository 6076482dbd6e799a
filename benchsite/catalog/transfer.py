"""Benchmark configs to and from YAML files: a file imports unchanged (its text is kept as
written, comments included) and exports as it was imported."""

from __future__ import annotations

from pathlib import Path

from django.core.exceptions import ValidationError
from django.db import transaction

from benchsite.catalog import versions
from benchsite.catalog.configs import check_config
from benchsite.catalog.models import CONFIG_NAME_RULE, BenchmarkConfig
from runner.engine.specs import SpecError


def config_name(path: str) -> str:
    return Path(path).stem


def import_config(text: str, name: str, user=None,
                  source: str = "") -> tuple[BenchmarkConfig, bool]:
    """Create the config `name` from YAML, or give an existing one a new version; SpecError
    when the YAML is no valid config (nothing is saved then)."""
    try:
        CONFIG_NAME_RULE(name)
    except ValidationError as error:
        raise SpecError(source or name, [f"config name {name!r}: {error.messages[0]}"]) from None
    check_config(text, name)
    with transaction.atomic():
        config, created = BenchmarkConfig.objects.get_or_create(
            name=name, defaults={"spec_yaml": text, "updated_by": user})
        if not created:
            config.spec_yaml, config.updated_by = text, user
            config.save()
        versions.record(config, user, note=f"imported from {source or 'YAML'}")
    return config, created


def export_config(config: BenchmarkConfig, self_contained: bool = False) -> str:
    """The config's YAML as saved; self-contained: with the catalog's recipes inlined, to run
    elsewhere (`python -m runner run FILE`)."""
    if self_contained:
        return check_config(config.spec_yaml, config.name).spec_yaml
    return config.spec_yaml
