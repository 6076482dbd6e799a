"""`GET /api/v3/compare`: every series' change between two commits, and a verdict."""

from __future__ import annotations

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from benchsite.regressions.compare import FILTERS, STATUSES, compare_commits

REQUIRED = ("repo", "base", "head")


class RowSerializer(serializers.Serializer):
    """Documents a row (`compare.Row`)."""

    series_id = serializers.IntegerField()
    benchmark = serializers.CharField()
    model = serializers.CharField()
    backend = serializers.CharField()
    mode = serializers.CharField()
    dtype = serializers.CharField()
    device = serializers.CharField()
    arch = serializers.CharField()
    metric = serializers.CharField()
    direction = serializers.ChoiceField(["higher", "lower"], allow_null=True)
    tolerance = serializers.FloatField()
    base = serializers.FloatField(allow_null=True)
    head = serializers.FloatField(allow_null=True)
    base_count = serializers.IntegerField()
    head_count = serializers.IntegerField()
    change = serializers.FloatField(allow_null=True, help_text="head / base - 1")
    p_value = serializers.FloatField(allow_null=True, help_text="Mann-Whitney U")
    status = serializers.ChoiceField(STATUSES)


class ComparisonSerializer(serializers.Serializer):
    repo = serializers.CharField()
    base = serializers.CharField()
    head = serializers.CharField()
    verdict = serializers.CharField(
        help_text="regressed, improved, unchanged, or 'no common results'")
    counts = serializers.DictField(child=serializers.IntegerField())
    rows = RowSerializer(many=True)


class Compare(APIView):
    @extend_schema(
        summary="Compare two commits",
        description="Every series with results at either commit: base and head values, "
        "relative change, direction, significance (Mann-Whitney U where both have 4+ "
        "repetitions) and status; an overall verdict and counts. CI's gate "
        "(`python -m runner gate`) fails a pull request on `regressed`.",
        parameters=[OpenApiParameter(name, OpenApiTypes.STR, required=True)
                    for name in REQUIRED]
        + [OpenApiParameter(name, OpenApiTypes.STR, description="exact match")
           for name in FILTERS],
        responses={200: ComparisonSerializer, 400: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        params = request.query_params
        errors = [f"{name}: required" for name in REQUIRED if not params.get(name)]
        errors += [f"{name}: unknown parameter; known: {', '.join(REQUIRED + FILTERS)}"
                   for name in params if name not in REQUIRED + FILTERS]
        if errors:
            return Response({"errors": errors}, status=400)
        filters = {name: params[name] for name in FILTERS if params.get(name)}
        comparison = compare_commits(params["repo"], params["base"], params["head"], **filters)
        return Response(comparison.as_dict())
