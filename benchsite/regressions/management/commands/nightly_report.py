import json
from datetime import UTC, date, timedelta

from django.core.management.base import BaseCommand, CommandError

from benchsite.regressions.models import DetectionSettings
from benchsite.regressions.report import (
    headline,
    nightly_reports,
    report_json,
    report_markdown,
    site_url,
    yesterday,
)
from benchsite.results.models import Run

FORMATS = ("markdown", "json", "summary")


class Command(BaseCommand):
    help = ("Build the nightly reports of a day (UTC): per benchmark and device, the series "
            "reported on each repo's default branches and what detection made of them; print "
            "them as markdown (a GitHub comment), JSON or one line each.")

    def add_arguments(self, parser):
        parser.add_argument("--day", default="",
                            help="YYYY-MM-DD, or 'latest': the day of the newest run "
                            "(default: yesterday)")
        parser.add_argument("--nights", type=int, default=1,
                            help="the reports of this many days up to --day (default 1)")
        parser.add_argument("--repo", help="only this repo")
        parser.add_argument("--notify", action="store_true",
                            help="send each report to the notification targets, once "
                            "(default: do not)")
        parser.add_argument("--format", dest="output", choices=FORMATS, default="markdown")

    def handle(self, *args, day, nights, repo, notify, output, **options):
        if repo and not Run.objects.filter(repo=repo).exists():
            raise CommandError(f"unknown repo {repo!r}: no runs of it are stored")
        last = self._day(day, repo)
        if nights < 1:
            raise CommandError(f"--nights {nights}: must be at least 1")
        settings = DetectionSettings.load()
        days = [last - timedelta(days=offset) for offset in range(nights - 1, -1, -1)]
        reports = [report for one in days
                   for report in nightly_reports(one, repo, send=notify, settings=settings)]
        if not reports:
            where = f"repo {repo!r}" if repo else "any repo"
            when = str(last) if nights == 1 else f"the {nights} days up to {last}"
            raise CommandError(f"nothing to report for {when}: no runs of {where} on a "
                               "default branch")
        if output == "json":
            self.stdout.write(json.dumps([report_json(report) for report in reports],
                                         indent=2))
        elif output == "markdown":
            self.stdout.write("\n---\n\n".join(report_markdown(report) for report in reports))
        else:
            for report in reports:
                self.stdout.write(f"{headline(report)}: "
                                  f"{site_url(report.get_absolute_url())}")

    @staticmethod
    def _day(text: str, repo: str | None) -> date:
        if text == "latest":
            runs = Run.objects.filter(repo=repo) if repo else Run.objects.all()
            newest = runs.order_by("-timestamp").values_list("timestamp", flat=True).first()
            if newest is None:
                raise CommandError("nothing to report: no runs are stored")
            return newest.astimezone(UTC).date()
        if not text:
            return yesterday()
        try:
            return date.fromisoformat(text)
        except ValueError:
            raise CommandError(f"--day {text!r}: expected YYYY-MM-DD or 'latest'") from None
