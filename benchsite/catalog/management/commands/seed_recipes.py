from django.core.management.base import BaseCommand

from benchsite.catalog.models import Recipe
from benchsite.catalog.seed import seed_builtins


class Command(BaseCommand):
    help = ("Add the runner registry's built-in recipes that the catalog lacks (after an "
            "upgrade added some); existing rows, enabled or not, are left as they are.")

    def handle(self, *args, **options):
        added = seed_builtins(Recipe)
        self.stdout.write(f"added {len(added)} built-in recipes: {', '.join(added)}" if added
                          else "every built-in recipe is in the catalog")
