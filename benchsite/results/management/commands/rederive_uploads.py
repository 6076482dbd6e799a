from django.core.management.base import BaseCommand, CommandError

from benchsite.results.ingest import UploadRefused, rederive
from benchsite.results.models import Upload


class Command(BaseCommand):
    help = ("Store uploads' results again from their raw payloads, e.g. after a change to how "
            "records are normalised. Each upload is one transaction.")

    def add_arguments(self, parser):
        parser.add_argument("uploads", nargs="*", type=int, metavar="UPLOAD_ID")
        parser.add_argument("--all", action="store_true", dest="every", help="every upload")

    def handle(self, *args, uploads, every, **options):
        if not uploads and not every:
            raise CommandError("name upload ids, or --all")
        queryset = Upload.objects.order_by("pk")
        if not every:
            queryset = queryset.filter(pk__in=uploads)
            missing = set(uploads) - set(queryset.values_list("pk", flat=True))
            if missing:
                raise CommandError(f"no such upload: {sorted(missing)}")
        for upload in queryset.iterator():
            try:
                count = rederive(upload)
            except UploadRefused as refused:
                self.stderr.write(f"upload {upload.pk}: refused now: {refused}")
                continue
            self.stdout.write(f"upload {upload.pk}: {count} results")
