from datetime import date, datetime

from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from benchsite.results import partitions


def month(text: str) -> date:
    return datetime.strptime(text, "%Y-%m").date()


class Command(BaseCommand):
    help = ("List the results table's monthly partitions (PostgreSQL) with their rows and "
            "size; --create makes months ahead of their data; --order rewrites settled "
            "months in their series' order (celery beat does it nightly).")

    def add_arguments(self, parser):
        parser.add_argument("--create", action="append", type=month, default=[],
                            metavar="YYYY-MM", help="make this month's partition (moving "
                            "its rows out of DEFAULT); repeatable")
        parser.add_argument("--count", action="store_true",
                            help="count rows exactly (scans every partition) instead of "
                                 "the planner's estimate")
        parser.add_argument("--order", action="store_true",
                            help="rewrite each month that ended over "
                                 f"{partitions.SETTLED.days} days ago in its series' order "
                                 "where it is not in it (CLUSTER: reads of that month wait "
                                 "while it is rewritten)")

    def handle(self, *args, create, count, order, **options):
        listed = partitions.partitions(connection, count=count)
        if not listed:
            raise CommandError(f"{partitions.TABLE} is not partitioned (PostgreSQL only, "
                               "migration results 0011)")
        for wanted in create:
            made = partitions.create_month(connection, wanted)
            self.stderr.write(f"{partitions.partition_name(wanted)}: "
                              f"{'made' if made else 'exists'}")
        if order:
            for done in partitions.order_months(connection):
                self.stderr.write(done.describe())
        if create or order:
            listed = partitions.partitions(connection, count=count)
        self.stdout.write(f"{'partition':<28} {'rows':>12} {'MiB':>10}  range")
        for partition in listed:
            rows = "?" if partition.rows is None else str(partition.rows)
            self.stdout.write(f"{partition.name:<28} {rows:>12} "
                              f"{partition.bytes / 2**20:>10.1f}  {partition.bounds}")
        if not count:
            self.stdout.write("(rows: the planner's estimate, ? before the first ANALYZE; "
                              "--count counts)")

