import time

from django.core.management.base import BaseCommand

from benchsite.regressions.detection import detect_series
from benchsite.regressions.models import DetectionSettings
from benchsite.regressions.notify import notify_regressions
from benchsite.results.models import Series


class Command(BaseCommand):
    help = ("Run regression detection on the recent history of every series (or a repo's): "
            "for results stored before detection was set up, or after changing its settings. "
            "Changes already recorded are matched, not raised again.")

    def add_arguments(self, parser):
        parser.add_argument("--repo", help="only this repo's series")
        parser.add_argument("--chunk", type=int, default=1000, help="series per query")
        parser.add_argument("--notify", action="store_true",
                            help="notify the targets of new regressions (default: do not)")

    def handle(self, *args, repo, chunk, notify, **options):
        series = Series.objects.order_by("pk")
        if repo:
            series = series.filter(repo=repo)
        ids = list(series.values_list("pk", flat=True))
        settings = DetectionSettings.load()
        started = time.perf_counter()
        created = 0
        for start in range(0, len(ids), chunk):
            found = detect_series(ids[start : start + chunk], settings)
            if notify:
                notify_regressions(found)
            created += len(found)
        self.stdout.write(f"{len(ids)} series: {created} new regressions "
                          f"({time.perf_counter() - started:.1f} s)")
