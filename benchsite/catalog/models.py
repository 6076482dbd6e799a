"""What gets benchmarked, managed in the admin: quantization recipes and named benchmark
configs (torchao YAML specs), with every config change kept as a version.

A built-in recipe needs no row to be usable: a row for it exists to show it and to disable
it. A custom recipe exists only here and is inlined into a job's spec when a config runs.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models

from runner.quant import recipes
from runner.quant.spec import check_custom_recipe

CONFIG_NAME_RULE = RegexValidator(r"^[A-Za-z0-9_.-]+$",
                                  "letters, digits and _ . - only (it becomes a file name)")


class Recipe(models.Model):
    class Kind(models.TextChoices):
        BUILTIN = "builtin", "built-in"
        PATTERN = "pattern", "built-in pattern (parameterised names)"
        CUSTOM = "custom", "custom (torchao config class)"

    name = models.CharField(
        max_length=100, unique=True,
        help_text="how specs name it: a built-in name (int8wo, int4wo-64-hqq), a built-in "
                  "pattern (int4wo: every int4wo-<group size> name) or a new name")
    kind = models.CharField(max_length=10, choices=Kind.choices, editable=False,
                            help_text="decided on save from the name and config")
    enabled = models.BooleanField(
        default=True, help_text="a disabled recipe is refused by config validation and runs; "
                                "disabling a pattern disables each of its names")
    description = models.TextField(blank=True)
    config = models.CharField(
        max_length=255, blank=True,
        help_text="custom recipes: a torchao config class path, e.g. "
                  "torchao.quantization.Int8WeightOnlyConfig; empty for built-in recipes")
    kwargs = models.JSONField(
        default=dict, blank=True,
        help_text='custom recipes: the config\'s keyword arguments as a JSON object; '
                  '{"class": PATH, "kwargs": {...}} builds an object, "torch.bfloat16" a dtype')
    sparsify = models.BooleanField(
        default=False, help_text="custom recipes: apply with torchao.sparsity.sparsify_ "
                                 "rather than quantize_")
    devices = models.JSONField(default=list, blank=True,
                               help_text="custom recipes: devices it runs on (none: any)")
    min_capability = models.CharField(
        max_length=10, blank=True, help_text='custom recipes: minimum CUDA compute capability, '
                                             'e.g. "8.9"')
    packages = models.JSONField(default=list, blank=True,
                                help_text="custom recipes: modules a worker must have")
    checked_with = models.CharField(
        max_length=100, blank=True, editable=False,
        help_text="the torchao that built the recipe's config when it was last saved")
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["kind", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def form(self) -> str:
        """How the recipe is written in specs: its name, or a pattern's form
        (int4wo-<group size>)."""
        if self.kind == self.Kind.PATTERN:
            return recipes.QUANTIZATION[self.name].form or self.name
        return self.name

    def requirements(self) -> recipes.Requirements:
        if self.kind == self.Kind.CUSTOM:
            return self.custom_recipe().requires
        if self.kind == self.Kind.PATTERN:
            return recipes.QUANTIZATION[self.name].requires
        return recipes.resolve(self.name).requires

    @property
    def requirements_text(self) -> str:
        requires = self.requirements()
        if requires.unavailable:
            return f"unavailable: {requires.unavailable}"
        parts = ["any device" if requires.devices == recipes.ALL_DEVICES
                 else " or ".join(sorted(requires.devices))]
        if requires.min_capability:
            parts.append("compute capability >= {}.{}".format(*requires.min_capability))
        if requires.packages:
            parts.append(f"packages {', '.join(requires.packages)}")
        return ", ".join(parts)

    def spec_item(self) -> dict[str, Any]:
        """A custom recipe as the mapping a spec's quantization_config_recipe_names takes."""
        item: dict[str, Any] = {"name": self.name, "config": self.config,
                                "kwargs": self.kwargs or {}}
        if self.sparsify:
            item["sparsify"] = True
        requires = {key: value for key, value in (("devices", self.devices),
                                                   ("min_capability", self.min_capability),
                                                   ("packages", self.packages)) if value}
        if requires:
            item["requires"] = requires
        return item

    def custom_recipe(self) -> recipes.CustomRecipe:
        return check_custom_recipe(self.spec_item())


class BenchmarkConfig(models.Model):
    name = models.CharField(max_length=100, unique=True, validators=[CONFIG_NAME_RULE],
                            help_text="names its jobs, schedules and exported file")
    description = models.TextField(blank=True)
    spec_yaml = models.TextField(
        "spec (YAML)",
        help_text="torchao's microbenchmark config format; quantization_config_recipe_names "
                  "may name any enabled recipe of the catalog")
    timing = models.JSONField(default=dict, blank=True,
                              help_text='runner timing settings for its jobs, e.g. '
                                        '{"samples": 10}; empty: the defaults')
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    updated_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["name"]
        verbose_name = "benchmark config"

    def __str__(self) -> str:
        return self.name


class ConfigVersion(models.Model):
    """A config's content after one change; restoring one records a new version."""

    config = models.ForeignKey(BenchmarkConfig, on_delete=models.CASCADE,
                               related_name="versions")
    number = models.PositiveIntegerField()
    description = models.TextField(blank=True)
    spec_yaml = models.TextField()
    timing = models.JSONField(default=dict, blank=True)
    note = models.CharField(max_length=200, blank=True,
                            help_text="where the change came from: admin, import, restore")
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True,
                                   on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["config", "-number"]
        constraints = [models.UniqueConstraint(fields=["config", "number"],
                                               name="config_version_number")]

    def __str__(self) -> str:
        return f"{self.config.name} v{self.number}"
