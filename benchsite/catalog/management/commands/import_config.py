from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from benchsite.catalog.configs import check_config
from benchsite.catalog.transfer import config_name, import_config
from runner.engine.specs import SpecError


class Command(BaseCommand):
    help = ("Import YAML specs (torchao's config format) as benchmark configs named after "
            "their files; an existing config gets a new version. All are checked first: "
            "nothing is imported unless every file is valid.")

    def add_arguments(self, parser):
        parser.add_argument("files", nargs="+", type=Path)
        parser.add_argument("--name", help="the config's name (one file only)")

    def handle(self, *args, files, name, **options):
        if name and len(files) > 1:
            raise CommandError("--name: give one file")
        texts, problems = {}, []
        for path in files:
            try:
                texts[path] = path.read_text()
                check_config(texts[path], str(path))
            except OSError as error:
                problems.append(f"{path}: cannot read: {error.strerror or error}")
            except SpecError as error:
                problems.append(str(error))
        if problems:
            raise CommandError("\n".join(problems))
        for path, text in texts.items():
            config, created = import_config(text, name or config_name(path), source=path.name)
            check = check_config(config.spec_yaml, config.name)
            self.stdout.write(f"{'created' if created else 'updated'} config {config.name!r} "
                              f"(version {config.versions.first().number}): "
                              + " ".join(check.lines()))
