"""`/recipes/`: enabled recipes with their latest geomean speedup per device."""

import copy
import io
import math

import orjson
import pytest

from benchsite.catalog.models import Recipe
from benchsite.results.ingest import store_upload
from tests.results.samples import META, TORCHAO

pytestmark = pytest.mark.django_db
H100, A100 = "NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-40GB"


def upload(recipe, arch, night, speedups, mode="max-autotune"):
    records = []
    for shape, value in speedups.items():
        record = copy.deepcopy(TORCHAO)
        record["benchmark"]["dtype"] = recipe
        record["benchmark"]["extra_info"].update(arch=arch, torch_compile_mode=mode)
        record["model"]["name"] = f"{recipe}-{shape}"
        record["metric"]["benchmark_values"] = [value]
        records.append(record)
    store_upload(orjson.dumps(records), announce=False, metadata={
        **META, "head_sha": f"{night:040d}", "job_id": hash((recipe, arch, night, mode)),
        "timestamp": META["timestamp"] + 86400 * night})


def test_latest_geomean_per_device_linking_to_the_quantization_page(client, seeded,
                                                                      custom_recipe):
    Recipe.objects.create(name="int4wo-64-hqq", kind=Recipe.Kind.BUILTIN)
    Recipe.objects.filter(name="float8wo").update(enabled=False)
    upload("my_int8", H100, 1, {"1-1-1": 9.0})
    upload("my_int8", H100, 2, {"1-1-1": 2.0, "2-2-2": 8.0})  # the latest: geomean 4
    upload("my_int8", H100, 2, {"1-1-1": 1.0}, mode="none")  # eager: max-autotune preferred
    upload("my_int8", A100, 1, {"1-1-1": 1.5})
    upload("int4wo-128", A100, 1, {"1-1-1": 1.2})  # a name of the int4wo family
    upload("int4wo-64-hqq", A100, 1, {"1-1-1": 1.1})  # has its own row
    upload("float8wo", H100, 1, {"1-1-1": 3.0})  # disabled: not listed

    page = client.get("/recipes/?format=json").json()
    [table] = page["tables"]
    assert table["columns"] == ["recipe", "kind", "definition", "requirements", A100, H100]
    rows = {row[0]: row for row in table["rows"]}
    assert "float8wo" not in rows and "int4wo" not in rows
    assert rows["my_int8"][1:] == [
        "custom (torchao config class)",
        'torchao.quantization.Int8WeightOnlyConfig({"granularity": {"class": '
        '"torchao.quantization.PerGroup", "kwargs": {"group_size": 32}}})',
        "any device", 1.5, 4.0]
    assert rows["int4wo-128"][1:] == ["built-in pattern (parameterised names)",
                                      "built-in: int4wo-<32|64|128|256>[-hqq]",
                                      "cuda, compute capability >= 8.0", 1.2, None]
    assert rows["int4wo-64-hqq"][4] == 1.1
    assert rows["int8dq"][1:] == ["built-in", "built-in", "any device", None, None]

    html = client.get("/recipes/").content.decode()
    night2 = f"{2:040d}"
    assert (f'href="/quantization/?repo=pytorch%2Fao&amp;branch=main&amp;sha={night2}&amp;'
            f'arch=NVIDIA+H100+80GB+HBM3&amp;compile_mode=max-autotune">4</a>') in html
    assert math.isclose(rows["my_int8"][5], 4.0)


def test_a_family_without_results_shows_its_form(client, seeded):
    rows = {row[0]: row for row in client.get("/recipes/?format=json").json()["tables"][0]["rows"]}
    assert "int4wo-<32|64|128|256>[-hqq]" in rows and "baseline" in rows


def test_seed_recipes_adds_what_the_registry_has_and_keeps_the_rest(seeded):
    from django.core.management import call_command

    from runner.quant.recipes import QUANTIZATION

    assert set(seeded.values_list("name", flat=True)) == set(QUANTIZATION)
    Recipe.objects.filter(name="int8wo").delete()
    Recipe.objects.filter(name="int8dq").update(enabled=False)
    out = io.StringIO()
    call_command("seed_recipes", stdout=out)
    assert out.getvalue() == "added 1 built-in recipes: int8wo\n"
    assert not Recipe.objects.get(name="int8dq").enabled
    assert Recipe.objects.get(name="int4wo").kind == "pattern"
