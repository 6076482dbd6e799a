from django.contrib.auth.models import Group, Permission
from django.core.management.base import BaseCommand, CommandError

from benchsite.access.roles import ROLES


class Command(BaseCommand):
    help = ("Create or update the groups viewers, maintainers and uploaders with exactly "
            "their permissions (idempotent); add users to them in the admin.")

    def handle(self, *args, **options):
        for role, names in ROLES.items():
            permissions = []
            for name in names:
                app_label, codename = name.split(".")
                try:
                    permissions.append(Permission.objects.get(
                        content_type__app_label=app_label, codename=codename))
                except Permission.DoesNotExist:
                    raise CommandError(f"permission {name} does not exist: run "
                                       "`python manage.py migrate` first") from None
            group, created = Group.objects.get_or_create(name=role)
            group.permissions.set(permissions)
            self.stdout.write(f"{'created' if created else 'updated'} group {role}: "
                              f"{len(permissions)} permissions")
