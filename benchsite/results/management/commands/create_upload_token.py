from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchsite.results.models import UploadToken
from runner.contract.repos import RepoNameError, check_patterns


class Command(BaseCommand):
    help = ("Create an API token scoped to repos and to what it may do, and print it (it is "
            "shown only once).")

    def add_arguments(self, parser):
        parser.add_argument("--repo", action="append", required=True, dest="repos",
                            help="OWNER/NAME, OWNER/* or *; repeatable")
        parser.add_argument("--name", help="what uses the token (default: the repos)")
        parser.add_argument("--scope", action="append", dest="scopes",
                            choices=UploadToken.Scope.values,
                            help="what it may do; repeatable (default: upload)")
        parser.add_argument("--queue", action="append", dest="queues", default=[],
                            help="a queue it may submit jobs to (with --scope submit_jobs); "
                                 "repeatable")

    def handle(self, *args, repos, name, scopes, queues, **options):
        try:
            check_patterns(repos, "--repo")
        except RepoNameError as error:
            raise CommandError(str(error)) from None
        scopes = list(dict.fromkeys(scopes or [UploadToken.Scope.UPLOAD]))
        for queue in queues:
            if queue not in settings.BENCH_QUEUES:
                raise CommandError(f"--queue {queue!r}: unknown; the queues are "
                                   f"{settings.BENCH_QUEUES} (setting BENCH_QUEUES)")
        if UploadToken.Scope.SUBMIT_JOBS in scopes and not queues:
            raise CommandError("--scope submit_jobs needs at least one --queue")
        if queues and UploadToken.Scope.SUBMIT_JOBS not in scopes:
            raise CommandError("--queue is for tokens with --scope submit_jobs")
        token = UploadToken(name=name or ", ".join(repos), repos=repos, scopes=scopes,
                            queues=list(dict.fromkeys(queues)))
        secret = token.issue()
        token.save()
        self.stdout.write(secret)
