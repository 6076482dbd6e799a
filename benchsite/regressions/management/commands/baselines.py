import time

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from benchsite.comparison import stored_baselines
from benchsite.regressions.changes import recorded_changes
from benchsite.regressions.models import DetectionSettings
from benchsite.results.ingest.store import store_for
from benchsite.results.models import Series


class Command(BaseCommand):
    help = ("Store the baselines (level and noise) of each series at its older points on its "
            "repo's default branches, which commit comparisons read instead of the history: "
            "after an upgrade, a bulk import, or a change of lookback_points. Detection "
            "stores the newest point's on its own.")

    def add_arguments(self, parser):
        parser.add_argument("--repo", help="only this repo's series")
        parser.add_argument("--points", type=int, default=400,
                            help="the newest points of each series to store (default 400)")
        parser.add_argument("--chunk", type=int, default=200, help="series per query")

    def handle(self, *args, repo, points, chunk, **options):
        if points < 1 or chunk < 1:
            raise CommandError("--points and --chunk must be at least 1")
        repos = [repo] if repo else list(
            Series.objects.order_by("repo").values_list("repo", flat=True).distinct())
        if repo and not Series.objects.filter(repo=repo).exists():
            raise CommandError(f"no series of repo {repo!r}")
        settings = DetectionSettings.load()
        started, total = time.perf_counter(), 0
        for name in repos:
            ids = list(Series.objects.filter(repo=name).order_by("pk")
                       .values_list("pk", flat=True))
            branches = settings.branches_for(name)
            for first in range(0, len(ids), chunk):
                some = ids[first:first + chunk]
                total += stored_baselines.backfill(
                    some, branches, recorded_changes(some, branches),
                    settings.lookback_points, points)
                self.stdout.write(f"\r{name}: {min(first + chunk, len(ids))}/{len(ids)} "
                                  f"series, {total:,} baselines", ending="")
                self.stdout.flush()
            self.stdout.write("")
        # A bulk load: the planner's statistics of the table are stale until analysed (with
        # none, a commit's baselines were read by a parallel scan of every page they lie on).
        store_for(connection).refresh_statistics()
        self.stdout.write(f"{total:,} baselines stored in {time.perf_counter() - started:.0f} s")
