from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchsite.catalog.models import BenchmarkConfig
from benchsite.catalog.transfer import export_config
from runner.engine.specs import SpecError


class Command(BaseCommand):
    help = "Write a benchmark config's YAML to stdout or a file, as it was saved or imported."

    def add_arguments(self, parser):
        parser.add_argument("name")
        parser.add_argument("-o", "--output", type=Path, help="a file (default: stdout)")
        parser.add_argument("--self-contained", action="store_true",
                            help="inline the catalog's custom recipes, to run the file "
                                 "elsewhere with `python -m runner run`")

    def handle(self, *args, name, output, self_contained, **options):
        try:
            config = BenchmarkConfig.objects.get(name=name)
        except BenchmarkConfig.DoesNotExist:
            raise CommandError(f"{name}: no such benchmark config") from None
        try:
            text = export_config(config, self_contained=self_contained)
        except SpecError as error:
            raise CommandError(str(error)) from None
        if output:
            output.write_text(text)
            self.stderr.write(f"wrote {output}")
        else:
            self.stdout.write(text, ending="")
