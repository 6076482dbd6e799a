import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import UTC, datetime

import orjson
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import connection
from tqdm import tqdm

from benchsite.results import partitions
from benchsite.results.demo import LARGE, nightly_uploads
from benchsite.results.ingest import store_upload
from benchsite.results.ingest.store import store_for
from benchsite.results.models import Upload


def _load_nights(nights: list[int], total: int, end: datetime) -> int:
    """One worker process: store these nights' uploads through the normal ingestion."""
    records = 0
    for metadata, batch in nightly_uploads(LARGE, end=end, nights=total, only=set(nights)):
        stored = store_upload(orjson.dumps(batch), metadata=metadata, source=Upload.Source.DEMO,
                              announce=False)
        records += stored.upload.record_count
    return records


class Command(BaseCommand):
    help = ("Seed a large history (a year of nightly torchao, compiler and vLLM runs on "
            "several devices: about 10 million results) through the normal ingestion code, "
            "for the dashboards' latency benchmark.")

    def add_arguments(self, parser):
        parser.add_argument("--nights", type=int, default=LARGE.nights)
        parser.add_argument("--workers", type=int, default=2)

    def handle(self, *args, nights, workers, **options):
        end = datetime.now(UTC)
        started = time.perf_counter()
        bar = tqdm(total=nights, unit="night", desc="history", file=self.stderr._out,
                   disable=None if options["verbosity"] else True, dynamic_ncols=True)
        with bar:
            # The first night alone creates the series; then the workers take a night each.
            records = _load_nights([0], nights, end)
            bar.update()
            connection.close()  # forked workers must open their own connections
            # Forked, so that workers start with Django set up (a spawned one would not be).
            with ProcessPoolExecutor(workers,
                                     mp_context=multiprocessing.get_context("fork")) as pool:
                loading = [pool.submit(_load_nights, [night], nights, end)
                           for night in range(1, nights)]
                for done in as_completed(loading):
                    records += done.result()
                    bar.update()
                    bar.set_postfix(results=records, refresh=False)
        store_for(connection).refresh_statistics(vacuum=True)
        # as the nightly maintenance leaves a year of history: the settled months in order
        ordered = [done for done in partitions.order_months(connection)
                   if done.outcome == "ordered"]
        self.stdout.write(f"ordered {len(ordered)} settled months in "
                          f"{sum(done.seconds for done in ordered):.0f} s")
        call_command("detect_regressions", stdout=self.stdout)
        call_command("baselines", points=nights, stdout=self.stdout)
        seconds = time.perf_counter() - started
        self.stdout.write(f"seeded {records} results over {nights} nights in {seconds:.0f} s "
                          f"({records / seconds:.0f} results/s)")
