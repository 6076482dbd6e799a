import time

import orjson
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection

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
        for metadata, batch in nightly_uploads(DEMO, nights=nights):
            stored = store_upload(orjson.dumps(batch), metadata=metadata,
                                  source=Upload.Source.DEMO, announce=False)
            uploads += 1
            records += stored.upload.record_count
        store_for(connection).refresh_statistics()
        # Once over the whole history rather than after each of hundreds of uploads.
        call_command("detect_regressions", stdout=self.stdout)
        # The nightly reports of the last week, so their pages have content (not sent).
        call_command("nightly_report", day="latest", nights=7, output="summary",
                     stdout=self.stdout)
        self.stdout.write(f"loaded {records} records in {uploads} uploads "
                          f"({time.perf_counter() - started:.1f} s)")
