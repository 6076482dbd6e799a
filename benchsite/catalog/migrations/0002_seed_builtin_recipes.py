"""The runner registry's built-in recipes, listed in the catalog from the start (later
registry additions: `python manage.py seed_recipes`)."""

from django.db import migrations


def seed(apps, schema_editor):
    from benchsite.catalog.seed import seed_builtins

    seed_builtins(apps.get_model("catalog", "Recipe"))


class Migration(migrations.Migration):

    dependencies = [
        ("catalog", "0001_initial"),
    ]

    operations = [
        migrations.RunPython(seed, migrations.RunPython.noop),
    ]
