"""YAML import/export (torchao's files unchanged), versions with who and when, restore."""

import io
import zipfile
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from benchsite.catalog.models import BenchmarkConfig, ConfigVersion
from runner.quant.spec import parse_spec
from tests.catalog.conftest import shown_messages, tiny_spec

pytestmark = pytest.mark.django_db
TORCHAO = Path(__file__).resolve().parents[2] / "fixtures" / "specs" / "torchao"
FILES = sorted(TORCHAO.glob("*.yml"))


def test_torchao_files_import_and_export_unchanged(tmp_path, capsys):
    call_command("import_config", *map(str, FILES))
    out = capsys.readouterr().out
    assert "created config 'dashboard_ci' (version 1): " in out
    assert "created config 'readme_example' (version 1): 12 cells (quantization)." in out
    for path in FILES:
        exported = tmp_path / path.name
        call_command("export_config", path.stem, "-o", str(exported))
        assert exported.read_text() == path.read_text()  # comments and all
    call_command("export_config", "readme_example")
    assert capsys.readouterr().out == (TORCHAO / "readme_example.yml").read_text()
    call_command("import_config", str(FILES[0]))  # the same text: no new version
    assert ConfigVersion.objects.count() == len(FILES)


def test_an_invalid_file_imports_nothing(tmp_path):
    bad = tmp_path / "bad.yml"
    bad.write_text(tiny_spec("int9wo"))
    with pytest.raises(CommandError, match=r"bad.yml: quantization_config_recipe_names\[0\]"):
        call_command("import_config", str(FILES[0]), str(bad))
    with pytest.raises(CommandError, match="cannot read"):
        call_command("import_config", str(tmp_path / "missing.yml"))
    with pytest.raises(CommandError, match="no such benchmark config"):
        call_command("export_config", "bad")
    assert not BenchmarkConfig.objects.exists()


def test_self_contained_export_runs_without_the_catalog(config, capsys):
    call_command("export_config", "tiny_cpu", "--self-contained")
    spec = parse_spec(yaml.safe_load(capsys.readouterr().out))
    assert spec.pairings[0].custom.name == "my_int8"


def test_admin_import_export_and_the_versions_of_each_change(maintainer_client):
    upload = io.BytesIO((TORCHAO / "readme_example.yml").read_bytes())
    upload.name = "readme_example.yml"
    page = maintainer_client.post("/admin/catalog/benchmarkconfig/import/", {"file": upload},
                                  follow=True)
    assert shown_messages(page) == ["readme_example: created from readme_example.yml"]
    config = BenchmarkConfig.objects.get(name="readme_example")
    change = f"/admin/catalog/benchmarkconfig/{config.pk}/change/"
    edited = config.spec_yaml.replace('  - "int8wo"\n', "")
    form = {"description": "fewer recipes", "spec_yaml": edited, "timing": "{}",
            "versions-TOTAL_FORMS": "0", "versions-INITIAL_FORMS": "0"}
    assert maintainer_client.post(change, form).status_code == 302
    first, second = config.versions.order_by("number")
    assert (first.note, second.note) == ("imported from readme_example.yml",
                                         "edited in the admin")
    assert second.created_by.username == "maintainer" and second.created_at >= first.created_at
    assert second.description == "fewer recipes" and "int8wo" not in second.spec_yaml

    bad = io.BytesIO(b"model_params: {device: tpu}\n")
    bad.name = "broken.yml"
    page = maintainer_client.post("/admin/catalog/benchmarkconfig/import/", {"file": bad})
    assert "model_params.device: 'tpu': must be one of cuda, cpu, mps, xpu" in \
        page.context["form"].errors["file"]

    listing = maintainer_client.post("/admin/catalog/benchmarkconfig/", {
        "action": "export_yaml", "_selected_action": [config.pk]})
    assert listing["Content-Disposition"] == 'attachment; filename="readme_example.yml"'
    assert listing.content.decode() == edited
    BenchmarkConfig.objects.create(name="other", spec_yaml=tiny_spec("int8wo"))
    both = maintainer_client.post("/admin/catalog/benchmarkconfig/", {
        "action": "export_yaml", "_selected_action": list(
            BenchmarkConfig.objects.values_list("pk", flat=True))})
    assert sorted(zipfile.ZipFile(io.BytesIO(both.content)).namelist()) == [
        "other.yml", "readme_example.yml"]


def test_an_old_version_is_restored_as_a_new_version(maintainer_client, maintainer):
    from benchsite.catalog import versions

    config = BenchmarkConfig.objects.create(name="cfg", spec_yaml=tiny_spec("int8wo"))
    versions.record(config, maintainer, note="created")
    config.spec_yaml = tiny_spec("int8dq")
    config.save()
    versions.record(config, None, note="edited")
    restore = f"/admin/catalog/benchmarkconfig/{config.pk}/restore/1/"
    diff = maintainer_client.get(restore).context["diff"]
    assert '-quantization_config_recipe_names: ["int8dq"]' in diff
    assert '+quantization_config_recipe_names: ["int8wo"]' in diff
    assert maintainer_client.post(restore).status_code == 302
    config.refresh_from_db()
    assert config.spec_yaml == tiny_spec("int8wo")
    latest = config.versions.first()
    assert (latest.number, latest.note, latest.created_by) == (3, "restored version 1",
                                                                maintainer)
    change = maintainer_client.get(f"/admin/catalog/benchmarkconfig/{config.pk}/change/")
    assert f"/admin/catalog/benchmarkconfig/{config.pk}/restore/2/" in change.content.decode()
