import time

from django.core.management.base import BaseCommand, CommandError

from benchsite.regressions import confirmation
from benchsite.regressions.detection import detect_repo
from benchsite.regressions.models import DetectionSettings
from benchsite.regressions.notify import notify_regressions
from benchsite.results.models import Series


class Command(BaseCommand):
    help = ("Run regression detection on the recent history of every series (or a repo's) on "
            "its repo's default branches: for results stored before detection was set up, or "
            "after changing its settings. Changes already recorded are matched, not raised "
            "again.")

    def add_arguments(self, parser):
        parser.add_argument("--repo", help="only this repo's series")
        parser.add_argument("--chunk", type=int, default=1000, help="series per query")
        parser.add_argument("--notify", action="store_true",
                            help="ask for the confirmation of new regressions (as an upload "
                            "does, per the detection settings) and notify the targets of "
                            "those not held for it (default: neither)")

    def handle(self, *args, repo, chunk, notify, **options):
        repos = [repo] if repo else list(
            Series.objects.order_by("repo").values_list("repo", flat=True).distinct())
        if repo and repo not in repos or not Series.objects.filter(repo__in=repos).exists():
            raise CommandError(f"no series of repo {repo!r}" if repo else "no series stored")
        settings = DetectionSettings.load()
        started = time.perf_counter()
        found = []
        for name in repos:
            found += detect_repo(name, settings, chunk)
        if notify:
            confirmation.request(found)  # first: what waits for its verdict is held
            notify_regressions(found)
        groups = len({r.group_id for r in found})
        self.stdout.write(f"{len(repos)} repo(s): {len(found)} new regressions in {groups} "
                          f"groups ({time.perf_counter() - started:.1f} s)")
