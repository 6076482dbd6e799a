"""`/api/v3/jobs`: submit, follow and cancel benchmark jobs."""

from __future__ import annotations

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import generics, permissions, serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.pagination import CursorPagination
from rest_framework.response import Response
from rest_framework.views import APIView

from benchsite.jobs import tasks
from benchsite.jobs.models import Job, JobCell
from benchsite.jobs.submit import JobRefused, submit_job
from benchsite.results.models import UploadToken


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

    class Meta:
        model = Job
        fields = ["id", "url", "name", "family", "config", "dashboard", "queue", "status",
                  "submitted_via", "repo",
                  "head_branch", "head_sha", "timing", "cells_total", "cells_done",
                  "created_at", "started_at", "finished_at"]


class JobDetailSerializer(JobSerializer):
    cells = JobCellSerializer(many=True, read_only=True)

    class Meta(JobSerializer.Meta):
        fields = [*JobSerializer.Meta.fields, "spec_yaml", "cells"]


class SubmitSerializer(serializers.Serializer):
    spec = serializers.CharField(help_text="the spec, in torchao's microbenchmark YAML")
    name = serializers.CharField(default="api.yml")
    queue = serializers.CharField(default="cpu")
    repo = serializers.CharField(required=False, default="")
    head_branch = serializers.CharField(required=False, default="")
    head_sha = serializers.CharField(required=False, default="")
    timing = serializers.DictField(required=False, default=dict,
                                   help_text="runner timing settings, e.g. {'samples': 10}")


class CanSubmitJobs(permissions.BasePermission):
    """An upload token (for its repos) or a user allowed to add jobs."""

    def has_permission(self, request, view):
        if request.method in permissions.SAFE_METHODS:
            return True
        if isinstance(request.auth, UploadToken):
            return True
        return bool(request.user and request.user.has_perm("jobs.add_job"))


class NewestFirst(CursorPagination):
    ordering = ("-created_at", "-id")
    page_size = 50


class JobList(generics.ListAPIView):
    queryset = Job.objects.select_related("config")
    serializer_class = JobSerializer
    permission_classes = [CanSubmitJobs]
    pagination_class = NewestFirst
    filterset_fields = ["status", "queue", "repo"]

    @extend_schema(request=SubmitSerializer, responses={201: JobSerializer},
                   summary="Submit a benchmark job")
    def post(self, request):
        data = SubmitSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = dict(data.validated_data)
        token = request.auth if isinstance(request.auth, UploadToken) else None
        repo = values["repo"] or settings.BENCH_JOB_REPO
        if token is not None and not token.allows(repo):
            raise PermissionDenied(f"token {token.name!r} may not run jobs for {repo!r}")
        try:
            job = submit_job(
                values.pop("spec"), via=Job.Via.API, token=token,
                user=request.user if request.user.is_authenticated else None, **values,
            )
        except JobRefused as error:
            raise ValidationError({"spec": [str(error)]}) from None
        job.refresh_from_db()
        return Response(JobSerializer(job).data, status=status.HTTP_201_CREATED)


class JobDetail(generics.RetrieveAPIView):
    queryset = Job.objects.select_related("config").prefetch_related("cells")
    serializer_class = JobDetailSerializer


class JobCancel(APIView):
    permission_classes = [CanSubmitJobs]

    @extend_schema(request=None, responses={200: JobSerializer}, summary="Cancel a job")
    def post(self, request, pk: int):
        job = generics.get_object_or_404(Job, pk=pk)
        token = request.auth if isinstance(request.auth, UploadToken) else None
        if token is not None and not token.allows(job.repo):
            raise PermissionDenied(f"token {token.name!r} may not cancel jobs for {job.repo!r}")
        tasks.cancel(job)
        return Response(JobSerializer(job).data)
