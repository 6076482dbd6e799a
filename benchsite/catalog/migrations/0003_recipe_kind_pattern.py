"""A parameterised built-in recipe (int4wo: every int4wo-<group size> name) is a "pattern",
not a "family": family means a benchmark family (runner.families)."""

from django.db import migrations, models


def rename_kind(old: str, new: str):
    def run(apps, schema_editor):
        apps.get_model("catalog", "Recipe").objects.filter(kind=old).update(kind=new)

    return run


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0002_seed_builtin_recipes"),
    ]

    operations = [
        migrations.AlterField(
            model_name="recipe",
            name="kind",
            field=models.CharField(choices=[("builtin", "built-in"), ("pattern", "built-in pattern (parameterised names)"), ("custom", "custom (torchao config class)")], editable=False, help_text="decided on save from the name and config", max_length=10),
        ),
        migrations.AlterField(
            model_name="recipe",
            name="name",
            field=models.CharField(help_text="how specs name it: a built-in name (int8wo, int4wo-64-hqq), a built-in pattern (int4wo: every int4wo-<group size> name) or a new name", max_length=100, unique=True),
        ),
        migrations.AlterField(
            model_name="recipe",
            name="enabled",
            field=models.BooleanField(default=True, help_text="a disabled recipe is refused by config validation and runs; disabling a pattern disables each of its names"),
        ),
        migrations.RunPython(rename_kind("family", "pattern"), rename_kind("pattern", "family")),
    ]
