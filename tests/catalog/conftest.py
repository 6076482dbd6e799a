"""Recipes and configs: users in each role, and specs small enough to run on a CPU."""

from __future__ import annotations

import io

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command

from tests.jobs.conftest import FAST_TIMING

CUSTOM_INT8 = {"name": "my_int8", "config": "torchao.quantization.Int8WeightOnlyConfig",
               "kwargs": {"granularity": {"class": "torchao.quantization.PerGroup",
                                          "kwargs": {"group_size": 32}}},
               "devices": ["cpu", "cuda"]}
# Two tiny CPU shapes, eager: each cell runs in well under a second with FAST_TIMING.
TINY_CPU = """\
quantization_config_recipe_names: [{recipes}]
output_dir: "var/test-catalog"
model_params:
  - name: "tiny"
    matrix_shapes:
      - name: "custom"
        shapes: [[32, 64, 64], [64, 128, 128]]
    high_precision_dtype: "torch.bfloat16"
    torch_compile_mode: false
    device: "cpu"
    model_type: "linear"
"""


def tiny_spec(*recipes: str) -> str:
    return TINY_CPU.format(recipes=", ".join(f'"{name}"' for name in recipes))


@pytest.fixture
def seeded(db):
    """The built-in recipes, as the data migration seeds them (a flushed database lacks them)."""
    from benchsite.catalog.models import Recipe
    from benchsite.catalog.seed import seed_builtins

    seed_builtins(Recipe)
    return Recipe.objects.all()


@pytest.fixture
def custom_recipe(db):
    from benchsite.catalog.models import Recipe

    return Recipe.objects.create(kind=Recipe.Kind.CUSTOM, **CUSTOM_INT8)


@pytest.fixture
def config(db, custom_recipe):
    from benchsite.catalog.models import BenchmarkConfig

    return BenchmarkConfig.objects.create(name="tiny_cpu", spec_yaml=tiny_spec("my_int8"),
                                          timing=FAST_TIMING)


@pytest.fixture
def roles(db):
    call_command("bootstrap_roles", stdout=io.StringIO())


def user_in(role: str | None, name: str, staff: bool = True) -> User:
    user = User.objects.create_user(name, password="a-long-password-1", is_staff=staff)
    if role:
        user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def maintainer(roles):
    return user_in("maintainers", "maintainer")


@pytest.fixture
def maintainer_client(client, maintainer):
    client.force_login(maintainer)
    return client


def shown_messages(response) -> list[str]:
    """The admin messages a (followed) response shows, as text."""
    return [str(message) for message in response.context["messages"]]
