"""Deleting uploads: each takes exactly its own results.

A run is created by its first upload (`Run.upload`) but later uploads of the same CI job add
results to it. Deleting an upload deletes its results; a run it created passes to the
earliest other upload with results in it, and goes only when nothing is left in it. The
upload row is the idempotency record, so the same payload uploaded again is stored again.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import transaction
from django.db.models import Count, Max, Min

from benchsite.results.ingest.summaries import refresh_slices, resummarize_runs
from benchsite.results.models import Result, Run, Upload


def delete_uploads(upload_ids: Iterable[int]) -> int:
    """Delete these uploads (by id: their payloads are never loaded) and their results only;
    returns how many uploads went."""
    ids = list(upload_ids)
    with transaction.atomic():
        mine = Result.objects.filter(upload_id__in=ids)
        touched = set(mine.values_list("run_id", flat=True).distinct())
        created = set(Run.objects.filter(upload_id__in=ids).values_list("pk", flat=True))
        branches = set(Run.objects.filter(pk__in=touched | created)
                       .values_list("repo", "head_branch"))
        mine.delete()
        left = {row["run_id"]: row for row in
                Result.objects.filter(run_id__in=touched | created).values("run_id")
                .annotate(owner=Min("upload_id"), count=Count("id"), start=Min("timestamp"),
                          end=Max("timestamp"))}
        Run.objects.filter(pk__in=(touched | created) - left.keys()).delete()
        for run_id, row in left.items():
            changes = {"result_count": row["count"], "timestamp": row["start"],
                       "last_timestamp": row["end"]}
            if run_id in created:
                changes["upload_id"] = row["owner"]
            Run.objects.filter(pk=run_id).update(**changes)
        resummarize_runs(sorted(left))
        refresh_slices(branches)
        _, deleted = Upload.objects.filter(pk__in=ids).delete()
    return deleted.get(Upload._meta.label, 0)
