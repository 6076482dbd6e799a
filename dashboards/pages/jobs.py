"""Jobs pages: the list (filtered by status, newest first) and a job's page (its cells, live
progress, links to its results)."""

from __future__ import annotations

from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404
from django.urls import reverse

from benchsite.jobs.models import Job
from dashboards import repro
from dashboards.pages.common import page_url
from dashboards.render import Page, Table
from dashboards.state import State

PAGE_SIZE = 50


def build_list(state: State) -> Page:
    status = state.text("status")
    jobs = Job.objects.all()
    if status:
        jobs = jobs.filter(status=status)
    listed = Paginator(jobs, PAGE_SIZE).get_page(state.query.get("page"))
    table = Table("jobs", ["job", "spec", "queue", "status", "cells done", "cells", "repo",
                           "branch", "sha", "submitted", "via", "finished"], [])
    for job in jobs if state.csv else listed:
        table.rows.append([job.pk, job.name, job.queue, job.status, job.cells_done,
                           job.cells_total, job.repo, job.head_branch, job.head_sha,
                           _iso(job.created_at), job.submitted_via, _iso(job.finished_at)])
        table.links.append({"job": job.get_absolute_url()})
    return Page(title="Jobs", filters={"status": status, "page": listed.number},
                tables=[table],
                context={"listed": listed, "status": status, "statuses": Job.Status.choices})


def build_detail(state: State, pk: int) -> Page:
    job = get_object_or_404(Job, pk=pk)
    cells = list(job.cells.all())
    table = Table("cells", ["index", "cell", "status", "attempts", "worker", "measured s",
                            "upload", "reason or error"], [])
    results = reverse("results")
    for cell in cells:
        table.rows.append([cell.index, cell.key, cell.status, cell.attempts, cell.worker,
                           cell.measured_s, cell.upload_id, cell.error or None])
        table.links.append({"upload": page_url(results, upload=cell.upload_id)}
                           if cell.upload_id else {})
    summary = Table("job", ["job", "spec", "family", "queue", "status", "cells done", "cells",
                            "repo", "branch", "sha", "adhoc", "submitted", "via", "started",
                            "finished"], [[
        job.pk, job.name, job.family, job.queue, job.status, job.cells_done, job.cells_total,
        job.repo, job.head_branch, job.head_sha, job.adhoc, _iso(job.created_at),
        job.submitted_via, _iso(job.started_at), _iso(job.finished_at)]])
    by_commit = {"sha": job.head_sha, "repo": job.repo}
    reproduce = repro.for_cells(job, cells, state.request.build_absolute_uri)
    return Page(
        title=f"Job {job.pk}", filters={"job": job.pk},
        tables=[table, summary, repro.table(reproduce)],
        context={"job": job, "cells": cells, "repros": reproduce,
                 "results_json": page_url(results, **by_commit),
                 "results_csv": page_url(results, format="csv", **by_commit)},
    )


def _iso(moment) -> str | None:
    return moment.isoformat() if moment else None
