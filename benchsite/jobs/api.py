"""`/api/v3/jobs`: submit, follow and cancel benchmark jobs."""

from __future__ import annotations

import django_filters
from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from benchsite.access.repos import validate_repo
from benchsite.jobs import tasks
from benchsite.jobs.models import Job, JobCell
from benchsite.jobs.submit import CommitRefused, JobRefused, submit_job
from benchsite.results.models import UploadToken
from benchsite.results.tokens import SiteApiAccess, token_of


class JobCellSerializer(serializers.ModelSerializer):
    class Meta:
        model = JobCell
        fields = ["index", "key", "status", "attempts", "error", "worker", "measured_s", "unstable",
                  "upload", "started_at", "finished_at"]


class JobSerializer(serializers.ModelSerializer):
    url = serializers.CharField(source="get_absolute_url", read_only=True)
    config = serializers.SlugRelatedField(slug_field="name", read_only=True,
                                          help_text="the benchmark config it ran, if any")
    dashboard = serializers.CharField(source="dashboard_url", read_only=True)
    adhoc = serializers.BooleanField(
        read_only=True, help_text="run without a commit: on the adhoc branch, its sha the "
                                  "job's own name (adhoc-job-ID), never a commit's")

    class Meta:
        model = Job
        fields = ["id", "url", "name", "family", "config", "dashboard", "queue", "status",
                  "submitted_via", "repo",
                  "head_branch", "head_sha", "adhoc", "timing", "cells_total", "cells_done",
                  "created_at", "enqueued_at", "started_at", "finished_at"]


class JobDetailSerializer(JobSerializer):
    cells = JobCellSerializer(many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "spec_yaml", "cells"]


class SubmitSerializer(serializers.Serializer):
    spec = serializers.CharField(help_text="the spec, in torchao's microbenchmark YAML")
    name = serializers.CharField(default="api.yml")
    queue = serializers.CharField(default="cpu")
    repo = serializers.CharField(required=False, default="", validators=[validate_repo],
                                 help_text="OWNER/NAME; default: setting BENCH_JOB_REPO")
    head_branch = serializers.CharField(
        required=False, default="", help_text="the commit's branch (default main); needs head_sha")
    head_sha = serializers.CharField(
        required=False, default="",
        help_text="the commit the workers measure (full sha); without it the job runs what the "
                  "workers have installed, recorded on the adhoc branch")
    timing = serializers.DictField(required=False, default=dict,
                                   help_text="runner timing settings, e.g. {'samples': 10}")


class CanSubmitJobs(permissions.BasePermission):
    """A token with the submit_jobs scope (for its repos and queues, checked by the view) or
    a user with `user_permission`."""

    user_permission = "jobs.add_job"

    def has_permission(self, request, view):
        if request.method in permissions.SAFE_METHODS:
            return True
        token = token_of(request)
        if token is not None:
            if not token.can(UploadToken.Scope.SUBMIT_JOBS):
                raise PermissionDenied(f"token {token.name!r} has no 'submit_jobs' scope "
                                       f"(its scopes: {token.scopes})")
            return True
        return bool(request.user and request.user.has_perm(self.user_permission))


def check_token_queue(token: UploadToken | None, queue: str) -> None:
    if token is not None and queue not in token.queues:
        raise PermissionDenied(f"queue {queue!r}: token {token.name!r} may submit only to "
                               f"{token.queues}")


class JobFilter(django_filters.FilterSet):
    repo = django_filters.CharFilter(validators=[validate_repo])

    class Meta:
        model = Job
        fields = ["status", "queue", "repo"]


class NewestFirst(CursorPagination):
    ordering = ("-created_at", "-id")
    page_size = 50


class JobList(generics.ListAPIView):
    queryset = Job.objects.select_related("config")
    serializer_class = JobSerializer
    permission_classes = [SiteApiAccess, CanSubmitJobs]
    pagination_class = NewestFirst
    filterset_class = JobFilter

    @extend_schema(request=SubmitSerializer, responses={201: JobSerializer, 202: JobSerializer},
                   summary="Submit a benchmark job",
                   description="201: recorded and queued. 202: recorded, but the broker could "
                               "not take its tasks (`enqueued_at` empty); the sweeper queues "
                               "it when the broker is back.")
    def post(self, request):
        data = SubmitSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        token = token_of(request)
        repo = values["repo"] or settings.BENCH_JOB_REPO
        if token is not None and not token.allows(repo):
            raise PermissionDenied(f"token {token.name!r} may not run jobs for {repo!r}")
        check_token_queue(token, values["queue"])
        try:
            job = submit_job(
                values.pop("spec"), via=Job.Via.API, token=token,
                user=request.user if request.user.is_authenticated else None, **values,
            )
        except CommitRefused as error:
            raise ValidationError({error.field: [str(error)]}) from None
        except JobRefused as error:
            raise ValidationError({"spec": [str(error)]}) from None
        job.refresh_from_db()
        queued = job.enqueued_at is not None
        return Response(JobSerializer(job).data,
                        status=status.HTTP_201_CREATED if queued else status.HTTP_202_ACCEPTED)


class JobDetail(generics.RetrieveAPIView):
    queryset = Job.objects.select_related("config").prefetch_related("cells")
    serializer_class = JobDetailSerializer


class JobCancel(APIView):
    permission_classes = [SiteApiAccess, CanSubmitJobs]

    @extend_schema(request=None, responses={200: JobSerializer}, summary="Cancel a job")
    def post(self, request, pk: int):
        job = generics.get_object_or_404(Job, pk=pk)
        token = token_of(request)
        if token is not None and not token.allows(job.repo):
            raise PermissionDenied(f"token {token.name!r} may not cancel jobs for {job.repo!r}")
        check_token_queue(token, job.queue)
        tasks.cancel(job)
        return Response(JobSerializer(job).data)
