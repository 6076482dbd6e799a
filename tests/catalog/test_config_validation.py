"""Configs are checked against the catalog and the runner: every problem, next to the YAML."""

from pathlib import Path

import pytest
import yaml

from benchsite.catalog.configs import check_config
from benchsite.catalog.models import Recipe
from runner.engine.specs import SpecError
from runner.quant.spec import parse_spec
from tests.catalog.conftest import tiny_spec

pytestmark = pytest.mark.django_db
TORCHAO = Path(__file__).resolve().parents[2] / "fixtures" / "specs" / "torchao"


def problems(text: str) -> list[str]:
    with pytest.raises(SpecError) as caught:
        check_config(text, "cfg")
    return caught.value.problems


def test_bad_yaml():
    [problem] = problems("quantization_config_recipe_names: [int8wo\n")
    assert problem.startswith("not valid YAML")


def test_unknown_key_unknown_recipe_and_bad_shape_are_all_reported():
    text = tiny_spec("int8wo", "int9wo").replace("[[32, 64, 64]", "[[32, 64]") + "colour: red\n"
    found = problems(text)
    assert any(p.startswith("colour: unknown key") for p in found)
    assert any(p.startswith("quantization_config_recipe_names[1]: unknown quantization "
                            "recipe 'int9wo'") for p in found)
    assert any(p.startswith("model_params[0].matrix_shapes[0].shapes[0]: [32, 64]: must be "
                            "[m, k, n]") for p in found)


def test_disabled_recipes_are_refused_by_name_and_by_pattern(seeded, custom_recipe):
    Recipe.objects.filter(name__in=["int8dq", "int4wo"]).update(enabled=False)
    custom_recipe.enabled = False
    custom_recipe.save()
    found = problems(tiny_spec("int8wo", "int8dq", "int4wo-64", "my_int8"))
    assert found == [
        "quantization_config_recipe_names[1]: recipe 'int8dq': it is disabled in the recipe "
        "catalog (enable it in the admin, or remove it here)",
        "quantization_config_recipe_names[2]: recipe 'int4wo-64': its pattern "
        "int4wo-<32|64|128|256>[-hqq] is disabled in the recipe catalog (enable it in the "
        "admin, or remove it here)",
        "quantization_config_recipe_names[3]: recipe 'my_int8': it is disabled in the recipe "
        "catalog (enable it in the admin, or remove it here)",
    ]


def test_a_catalog_recipe_is_inlined_so_the_job_spec_stands_alone(custom_recipe):
    check = check_config(tiny_spec("int8wo", "my_int8"), "cfg")
    assert len(check.cell_keys) == 4
    spec = parse_spec(yaml.safe_load(check.spec_yaml))  # without the catalog
    custom = spec.pairings[1].custom
    assert custom.config == "torchao.quantization.Int8WeightOnlyConfig"
    assert custom.kwargs == custom_recipe.kwargs
    assert check_config(tiny_spec("int8wo"), "cfg").spec_yaml == tiny_spec("int8wo")


def test_cells_and_the_cells_each_queue_skips(settings):
    text = (TORCHAO / "dashboard_ci.yml").read_text()
    check = check_config(text, "dashboard_ci")
    shapes = len(parse_spec(yaml.safe_load(text)).param_sets[0].shapes)
    assert len(check.cell_keys) == 5 * shapes
    assert {reason: len(keys) for reason, keys in check.skipped["cpu"].items()} == {
        "runs on cuda; queue cpu's workers have no GPU": 5 * shapes}
    assert "cuda" not in check.skipped  # capability 9.0 runs float8
    lines = check.lines()
    assert lines[0] == f"{5 * shapes} cells (quantization)."
    assert lines[2] == f"Queue cuda (cuda, capability 9.0, packages triton): {5 * shapes} run, " \
                       "0 skipped."

    settings.BENCH_QUEUE_HARDWARE = {"cuda": {"device": "cuda", "capability": "8.0"}}
    check = check_config(text, "dashboard_ci")
    assert check.lines()[1] == ("Queue cpu: skips not predicted, its hardware is not described "
                                "(setting BENCH_QUEUE_HARDWARE).")
    reason = "needs CUDA compute capability >= 8.9, queue cuda has 8.0"
    assert {r: len(keys) for r, keys in check.skipped["cuda"].items()} == {reason: 2 * shapes}
    assert "float8dq-tensor" in check.skipped["cuda"][reason][0]


def test_a_custom_recipe_s_requirements_decide_its_skips(custom_recipe):
    custom_recipe.devices, custom_recipe.packages = ["cpu"], ["fbgemm_gpu"]
    custom_recipe.save()
    check = check_config(tiny_spec("my_int8"), "cfg")
    assert list(check.skipped["cpu"]) == ["needs package fbgemm_gpu, not on queue cpu's workers"]


def test_the_admin_shows_each_problem_next_to_the_yaml_and_the_check_after_saving(
        maintainer_client, custom_recipe):
    add = "/admin/catalog/benchmarkconfig/add/"
    form = {"name": "tiny_cpu", "description": "", "timing": "{}",
            "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"}
    page = maintainer_client.post(add, {**form, "spec_yaml": tiny_spec("int9wo")})
    errors = page.context["adminform"].form.errors
    assert list(errors) == ["spec_yaml"] and "'int9wo'" in errors["spec_yaml"][0]
    page = maintainer_client.post(add, {**form, "spec_yaml": tiny_spec("my_int8"),
                                        "timing": '{"samplez": 3}'})
    assert "unknown settings ['samplez']" in page.context["adminform"].form.errors["timing"][0]
    saved = maintainer_client.post(add, {**form, "spec_yaml": tiny_spec("my_int8")},
                                   follow=True)
    text = saved.content.decode()
    assert "Version 1 saved. 2 cells (quantization)." in text
    assert "Queue cuda (cuda, capability 9.0, packages triton): 2 run, 0 skipped." in text


def test_every_catalog_admin_page_renders_for_a_maintainer(maintainer_client, seeded, config):
    pattern = Recipe.objects.get(name="int4wo")
    pages = ["/admin/catalog/recipe/", "/admin/catalog/recipe/add/",
             f"/admin/catalog/recipe/{pattern.pk}/change/",
             "/admin/catalog/benchmarkconfig/", "/admin/catalog/benchmarkconfig/add/",
             "/admin/catalog/benchmarkconfig/import/",
             f"/admin/catalog/benchmarkconfig/{config.pk}/change/",
             f"/admin/catalog/benchmarkconfig/{config.pk}/run/",
             f"/admin/catalog/benchmarkconfig/{config.pk}/schedule/",
             f"/admin/jobs/job/?config__id__exact={config.pk}"]
    for url in pages:
        assert maintainer_client.get(url, follow=True).status_code == 200, url
    page = maintainer_client.get(f"/admin/catalog/recipe/{pattern.pk}/change/")
    assert "cuda, compute capability &gt;= 8.0" in page.content.decode()
    custom = Recipe.objects.get(name="my_int8")
    page = maintainer_client.get(f"/admin/catalog/recipe/{custom.pk}/change/")
    assert page.status_code == 200 and "PerGroup" in page.content.decode()
    text = maintainer_client.get(f"/admin/catalog/benchmarkconfig/{config.pk}/change/") \
        .content.decode()
    assert "2 cells (quantization)." in text and "no results yet" in text
    Recipe.objects.filter(name="my_int8").update(enabled=False)
    text = maintainer_client.get(f"/admin/catalog/benchmarkconfig/{config.pk}/change/") \
        .content.decode()
    assert "Cannot run now:" in text and "it is disabled in the recipe catalog" in text
