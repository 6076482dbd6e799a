import time

import orjson
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection
from tqdm import tqdm

from benchsite.results.demo import DEMO, nightly_uploads
from benchsite.results.ingest import store_upload
from benchsite.results.ingest.store import store_for
from benchsite.results.models import Upload


class Command(BaseCommand):
    help = ("Fill the database with a demo history (nightly torchao microbenchmarks on two "
            "GPUs, compiler and vLLM runs, with injected changes) through the upload "
            "API's ingestion code.")

    def add_arguments(self, parser):
        parser.add_argument("--nights", type=int, default=90)
        parser.add_argument("--reset", action="store_true",
                            help="delete earlier demo data first")

    def handle(self, *args, nights, reset, **options):
        demo = Upload.objects.filter(source=Upload.Source.DEMO)
        if reset:
            demo.delete()
        elif demo.exists():
            self.stdout.write("demo data already loaded (use --reset to load it again)")
            return
        started = time.perf_counter()
        uploads = records = 0
        night = None  # a night is one commit: the bar moves when the sha does
        # On stderr when it is a terminal; none with --verbosity 0.
        with tqdm(total=nights, unit="night", desc="demo history", file=self.stderr._out,
                  disable=None if options["verbosity"] else True, dynamic_ncols=True) as bar:
            for metadata, batch in nightly_uploads(DEMO, nights=nights):
                stored = store_upload(orjson.dumps(batch), metadata=metadata,
                                      source=Upload.Source.DEMO, announce=False)
                uploads += 1
                records += stored.upload.record_count
                if metadata["head_sha"] != night:
                    night = metadata["head_sha"]
                    bar.update()
                bar.set_postfix(records=records, refresh=False)
        store_for(connection).refresh_statistics()
        self.stdout.write(f"stored {records} records; detecting regressions over the history")
        # Once over the whole history rather than after each of hundreds of uploads.
        call_command("detect_regressions", stdout=self.stdout)
        # The nightly reports of the last week, so their pages have content (not sent).
        call_command("nightly_report", day="latest", nights=7, output="summary",
                     stdout=self.stdout)
        self.stdout.write(f"loaded {records} records in {uploads} uploads "
                          f"({time.perf_counter() - started:.1f} s)")
