"""Query API: `GET /api/v3/results` (JSON pages or streamed CSV), runs, uploads and the
environment changes between runs."""

from __future__ import annotations

import math
from collections.abc import Iterator

import django_filters
from django import forms
from django.core.exceptions import ValidationError
from django.db.models import Q
from django_filters.fields import IsoDateTimeField
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    extend_schema_view,
)
from rest_framework import generics, serializers
from rest_framework.pagination import CursorPagination

from benchsite import csvfile, dates
from benchsite.access.repos import validate_repo
from benchsite.results.models import EnvironmentChange, Result, Run, Upload, repetitions

RESULT_FIELDS = {
    "id": "id",
    "timestamp": "timestamp",
    "repo": "series__repo",
    "branch": "run__head_branch",
    "sha": "run__head_sha",
    "run_id": "run_id",
    "upload_id": "upload_id",
    "benchmark": "series__benchmark",
    "mode": "series__mode",
    "dtype": "series__dtype",
    "model": "series__model",
    "model_type": "series__model_type",
    "backend": "series__backend",
    "suite": "series__suite",
    "device": "series__device",
    "arch": "series__arch",
    "metric": "series__metric",
    "value": "value",
    "values": "values",
    "target": "target",
    "string_values": "string_values",
    "extra_info": "extra_info",
    "series_id": "series_id",
    "series_extra_info": "series__extra_info",
}


def row_cells(row: dict) -> list:
    """A `values()` row's fields in RESULT_FIELDS' order, `values` as the repetitions."""
    return [repetitions(row["values"], row["value"]) if name == "values" else row[path]
            for name, path in RESULT_FIELDS.items()]


def jsonable(value):
    """JSON has no NaN or Infinity: they go out as the strings the v3 format accepts."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, list):
        return [jsonable(item) for item in value]
    return value


class NewestFirst(CursorPagination):
    ordering = ("-timestamp", "-id")
    page_size = 500
    page_size_query_param = "limit"
    max_page_size = 10000


class TimeField(IsoDateTimeField):
    def validate(self, value):
        super().validate(value)
        if value is not None and (reason := dates.problem(value)):
            raise ValidationError(reason)


class TimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 time within what the database stores (benchsite.dates)."""

    field_class = TimeField


@extend_schema_field({"type": "integer", "format": "int64", "minimum": -2**63,
                      "maximum": 2**63 - 1})
class IdFilter(django_filters.NumberFilter):
    """A whole number within a bigint column's range: a larger one is an error naming the
    parameter, not an empty page (nor, on SQLite, a failed query)."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs):
        super().__init__(*args, min_value=-2**63, max_value=2**63 - 1, **kwargs)

    def get_max_validator(self):
        return None


class ResultFilter(django_filters.FilterSet):
    repo = django_filters.CharFilter(field_name="series__repo", validators=[validate_repo])
    branch = django_filters.CharFilter(field_name="run__head_branch")
    sha = django_filters.CharFilter(method="of_runs")
    benchmark = django_filters.CharFilter(field_name="series__benchmark")
    model = django_filters.CharFilter(field_name="series__model")
    backend = django_filters.CharFilter(field_name="series__backend")
    mode = django_filters.CharFilter(field_name="series__mode")
    dtype = django_filters.CharFilter(field_name="series__dtype")
    device = django_filters.CharFilter(field_name="series__device")
    arch = django_filters.CharFilter(field_name="series__arch")
    metric = django_filters.CharFilter(field_name="series__metric")
    run = IdFilter(method="of_runs")
    upload = IdFilter(field_name="upload_id")
    since = TimeFilter(field_name="timestamp", lookup_expr="gte")
    until = TimeFilter(field_name="timestamp", lookup_expr="lt")

    class Meta:
        model = Result
        fields: list[str] = []

    def of_runs(self, queryset, name, value):
        """The results of a commit's runs or of one run, read within their results' times
        (results.models.run_spans)."""
        runs = Run.objects.filter(**{"head_sha" if name == "sha" else "pk": value})
        return queryset.of_runs(runs.only("pk", "timestamp", "last_timestamp"))


class ResultRowSerializer(serializers.Serializer):
    """Documents the row shape; rows are built from `values()` without model instances."""

    id = serializers.IntegerField()
    timestamp = serializers.DateTimeField()
    repo = serializers.CharField()
    branch = serializers.CharField()
    sha = serializers.CharField()
    run_id = serializers.IntegerField()
    upload_id = serializers.IntegerField()
    benchmark = serializers.CharField()
    mode = serializers.CharField()
    dtype = serializers.CharField()
    model = serializers.CharField()
    model_type = serializers.CharField()
    backend = serializers.CharField()
    suite = serializers.CharField()
    device = serializers.CharField()
    arch = serializers.CharField()
    metric = serializers.CharField()
    value = serializers.FloatField(allow_null=True)
    values = serializers.ListField(child=serializers.FloatField())
    target = serializers.FloatField(allow_null=True)
    string_values = serializers.ListField(child=serializers.CharField(), allow_null=True)
    extra_info = serializers.JSONField(allow_null=True)
    series_id = serializers.IntegerField()
    series_extra_info = serializers.JSONField()

    def to_representation(self, row):
        return dict(zip(RESULT_FIELDS, map(jsonable, row_cells(row)), strict=True))


@extend_schema_view(
    get=extend_schema(
        summary="Query results",
        description="Filtered results, newest first, as cursor-paginated JSON; `?format=csv` "
        "streams every matching row as CSV with no page limit.",
        parameters=[OpenApiParameter("format", OpenApiTypes.STR, enum=["json", "csv"]),
                    OpenApiParameter("limit", OpenApiTypes.INT)],
    )
)
class ResultList(generics.ListAPIView):
    serializer_class = ResultRowSerializer
    filterset_class = ResultFilter
    pagination_class = NewestFirst

    def get_queryset(self):
        return Result.objects.values(*RESULT_FIELDS.values())

    def list(self, request, *args, **kwargs):
        if request.query_params.get("format") == "csv":
            rows = self.filter_queryset(self.get_queryset()).order_by("-timestamp", "-id")
            return csvfile.response("results.csv", RESULT_FIELDS, csv_rows(rows), stream=True)
        return super().list(request, *args, **kwargs)


CSV_CHUNK = 5000  # rows a query of a streamed CSV reads


def csv_rows(rows) -> Iterator[list]:
    """Every matching row (newest first), a query of CSV_CHUNK rows at a time after the
    last one read: no database cursor stays open between chunks (a download the client
    leaves half read holds nothing). Lists keep their infinities as the v3 strings ("inf");
    a number is written as a number."""
    after = Q()
    while True:
        chunk = list(rows.filter(after)[:CSV_CHUNK])
        for row in chunk:
            yield [jsonable(value) if isinstance(value, list) else value
                   for value in row_cells(row)]
        if len(chunk) < CSV_CHUNK:
            return
        last = chunk[-1]
        after = Q(timestamp__lt=last["timestamp"]) | Q(timestamp=last["timestamp"],
                                                        id__lt=last["id"])


class RunFilter(django_filters.FilterSet):
    repo = django_filters.CharFilter(validators=[validate_repo])
    branch = django_filters.CharFilter(field_name="head_branch")
    sha = django_filters.CharFilter(field_name="head_sha")
    workflow_id = IdFilter()
    job_id = IdFilter()
    since = TimeFilter(field_name="timestamp", lookup_expr="gte")
    until = TimeFilter(field_name="timestamp", lookup_expr="lt")

    class Meta:
        model = Run
        fields = ["repo", "device", "arch", "upload", "environment_hash"]


class RunSerializer(serializers.ModelSerializer):
    class Meta:
        model = Run
        exclude = ["identity"]


class RunList(generics.ListAPIView):
    queryset = Run.objects.all()
    serializer_class = RunSerializer
    filterset_class = RunFilter
    pagination_class = NewestFirst


class RunDetail(generics.RetrieveAPIView):
    queryset = Run.objects.all()
    serializer_class = RunSerializer


class EnvironmentChangeFilter(django_filters.FilterSet):
    repo = django_filters.CharFilter(validators=[validate_repo])
    since = TimeFilter(field_name="at", lookup_expr="gte")
    until = TimeFilter(field_name="at", lookup_expr="lt")

    class Meta:
        model = EnvironmentChange
        fields = ["repo", "branch", "device", "arch", "name"]


class EnvironmentChangeSerializer(serializers.ModelSerializer):
    class Meta:
        model = EnvironmentChange
        fields = "__all__"


class NewestChangeFirst(NewestFirst):
    ordering = ("-at", "-id")


@extend_schema_view(get=extend_schema(
    summary="Environment changes",
    description="Where the environment (`Run.environment`: packages, runtimes, GPU, driver...) "
    "of a job's consecutive runs on one device and default branch changed: the runs on "
    "either side, when, what changed (`changes`) and as a line (`summary`). Newest first."))
class EnvironmentChangeList(generics.ListAPIView):
    queryset = EnvironmentChange.objects.all()
    serializer_class = EnvironmentChangeSerializer
    filterset_class = EnvironmentChangeFilter
    pagination_class = NewestChangeFirst


class UploadSerializer(serializers.ModelSerializer):
    runs = serializers.SerializerMethodField(help_text="ids of the runs its results belong to")

    class Meta:
        model = Upload
        fields = ["id", "created_at", "source", "record_count", "repos", "request_metadata",
                  "runs"]

    def get_runs(self, upload) -> list[int]:
        return sorted(set(upload.results.values_list("run_id", flat=True)))


class UploadDetail(generics.RetrieveAPIView):
    queryset = Upload.objects.defer("payload_gzip")
    serializer_class = UploadSerializer
