from collections import Counter

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from benchsite.regressions.models import AlertGroup, Regression
from benchsite.results.demo import injected, sha
from benchsite.results.models import Upload


class Command(BaseCommand):
    help = ("On the demo data (load_demo): the regressions and alert groups detection made, "
            "which injected change each group matches (and the environment change its members "
            "coincide with), and the gate command that compares its two commits. Exits 1 when "
            "an injected change is not found in exactly one group, a group's members coincide "
            "with an environment change where its injected change is not one (or do not where "
            "it is), or a group of the demo's history matches none (groups of other commits, "
            "e.g. `bench demo-bisect`'s or an upload's, are counted apart).")

    def add_arguments(self, parser):
        parser.add_argument("--nights", type=int, default=90,
                            help="the nights load_demo was run with")

    def handle(self, *args, nights, **options):
        if not Upload.objects.filter(source=Upload.Source.DEMO).exists():
            raise CommandError("no demo data: run `python manage.py load_demo` first")
        night = {sha(n): n for n in range(nights)}
        changes = injected(nights)
        everything = list(AlertGroup.objects.prefetch_related(
            "members__series", "members__environment_change").order_by("first_bad_at", "pk"))
        groups = [group for group in everything if group.first_bad_sha in night]
        found: Counter[str] = Counter()
        unmatched = mislabelled = 0
        demo = Regression.objects.filter(group__in=groups).count()
        self.stdout.write(f"{demo} regressions in {len(groups)} groups of the demo's history")
        for group in groups:
            members = list(group.members.all())
            matched = [change.name for change in changes
                       if night.get(group.first_bad_sha) == change.night
                       and any(change.shows_in(member.series) for member in members)]
            found.update(matched)
            unmatched += not matched
            labels = {m.environment_change.summary for m in members if m.environment_change}
            environment = any(change.environment for change in changes
                              if change.name in matched)
            mislabelled += bool(matched) and environment != bool(labels)
            kinds = Counter(f"{m.kind} ({m.get_detector_display()})" for m in members)
            self.stdout.write(
                f"  group {group.pk}: {group.repo}, nights {night.get(group.last_good_sha, '?')}"
                f"..{night.get(group.first_bad_sha, '?')}, {len(members)} members "
                f"[{', '.join(f'{n} {kind}' for kind, n in kinds.most_common())}]: "
                f"{' + '.join(matched) or 'no injected change'}")
            for label in sorted(labels):
                self.stdout.write(f"    environment: {label}")
            self.stdout.write(f"    gate: python -m runner gate --server {settings.BENCH_SITE_URL}"
                              f" --repo {group.repo} --base {group.last_good_sha} "
                              f"--head {group.first_bad_sha}")
        if len(everything) > len(groups):
            self.stdout.write(f"  {len(everything) - len(groups)} group(s) of commits outside "
                              "the demo's history (bench demo-bisect, uploads), not judged here")
        missed = [change.name for change in changes if found[change.name] != 1]
        for change in changes:
            self.stdout.write(f"  injected: {change.name} (night {change.night}): "
                              f"{found[change.name]} group(s)")
        if missed or unmatched or mislabelled:
            raise CommandError(f"{len(missed)} injected change(s) not in exactly one group "
                               f"({', '.join(missed) or 'none'}); {unmatched} group(s) match "
                               f"no injected change; {mislabelled} group(s) labelled with an "
                               "environment change where there was none, or the other way")
