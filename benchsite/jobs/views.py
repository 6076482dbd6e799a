from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from benchsite.jobs.models import Job


def job_list(request):
    jobs = Job.objects.all()
    status = request.GET.get("status")
    if status:
        jobs = jobs.filter(status=status)
    page = Paginator(jobs, 50).get_page(request.GET.get("page"))
    return render(request, "jobs/list.html", {"page": page, "status": status,
                                              "statuses": Job.Status.choices})


def job_detail(request, pk: int):
    job = get_object_or_404(Job, pk=pk)
    cells = job.cells.select_related("upload")
    return render(request, "jobs/detail.html", {"job": job, "cells": cells})
