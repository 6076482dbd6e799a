from django.core.management.base import BaseCommand, CommandError

from benchsite.results.models import UploadToken


class Command(BaseCommand):
    help = "Create an upload token scoped to repos and print it (it is shown only once)."

    def add_arguments(self, parser):
        parser.add_argument("--repo", action="append", required=True, dest="repos",
                            help="OWNER/NAME or a pattern such as OWNER/*; repeatable")
        parser.add_argument("--name", help="what uses the token (default: the repos)")

    def handle(self, *args, repos, name, **options):
        for repo in repos:
            if repo.count("/") != 1:
                raise CommandError(f"--repo {repo!r}: expected OWNER/NAME or OWNER/*")
        token = UploadToken(name=name or ", ".join(repos), repos=repos)
        secret = token.issue()
        token.save()
        self.stdout.write(secret)
