"""`GET /api/v3/compare`: every series' change between two commits, and a verdict."""

from __future__ import annotations

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from benchsite.comparison import environments
from benchsite.comparison.compare import FILTERS, CannotCompare
from benchsite.comparison.judge import MAX_FDR, STATES, check_fdr
from benchsite.regressions.comparisons import recent_comparison

REQUIRED = ("repo", "base", "head")
OPTIONS = ("fdr",)
KNOWN = REQUIRED + FILTERS + OPTIONS


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
    level = serializers.FloatField(
        allow_null=True, help_text="the default branch's level up to the base (median)")
    noise = serializers.FloatField(
        allow_null=True, help_text="relative noise of one point in that history")
    history = serializers.IntegerField(help_text="history points judged with")
    p_value = serializers.FloatField(
        allow_null=True, help_text="the head against the level, in noise units")
    mw_p_value = serializers.FloatField(allow_null=True, help_text="Mann-Whitney U")
    adjusted_p = serializers.FloatField(
        allow_null=True, help_text="p_value adjusted over the comparison's series "
        "(Benjamini-Hochberg): a state past the tolerance needs it at most `fdr`")
    head_runs = serializers.IntegerField(help_text="runs the head's values come from")
    state = serializers.ChoiceField(STATES)
    held = serializers.CharField(
        help_text="for a noisy row: the state the false discovery rate held back, else ''")
    rule = serializers.CharField(help_text="which rule decided the state")


class EnvironmentChangeSerializer(serializers.Serializer):
    """Documents a change of an environment (`results.environment.Change`)."""

    key = serializers.CharField(help_text="torch, cuda, driver, gpu, image, ...")
    before = serializers.CharField(allow_null=True, help_text="null: absent at the base")
    after = serializers.CharField(allow_null=True, help_text="null: absent at the head")


class EnvironmentDiffSerializer(serializers.Serializer):
    """Documents a device's environments (`environments.EnvironmentDiff`)."""

    device = serializers.CharField()
    arch = serializers.CharField()
    job = serializers.CharField(
        help_text="the runs' job name (jobs are compared with their own job); '' for every "
        "job of a device that is the same, or one that ran at one commit only")
    base_hash = serializers.CharField(
        help_text="the base run's environment hash; '': unknown, or no run at the base")
    head_hash = serializers.CharField(
        help_text="the head run's environment hash; '': unknown, or no run at the head")
    same = serializers.BooleanField(help_text="both known, and nothing differs")
    state = serializers.ChoiceField(
        environments.STATES, help_text="same; changed; unknown (a side has no fingerprint); "
        "base_only, head_only (the device ran at one commit only: no series compared)")
    changes = EnvironmentChangeSerializer(many=True)
    summary = serializers.CharField(
        help_text="e.g. 'torch 2.5.0 -> 2.6.0; cuda, driver unchanged', 'same environment'")


class ComparisonSerializer(serializers.Serializer):
    repo = serializers.CharField()
    base = serializers.CharField()
    head = serializers.CharField()
    branches = serializers.ListField(child=serializers.CharField(),
                                     help_text="the default branches the history is from")
    fdr = serializers.FloatField(
        help_text="the false discovery rate the series judged on their noise were held to")
    verdict = serializers.CharField(
        help_text="regression, improvement, unchanged, or 'no common results'")
    counts = serializers.DictField(child=serializers.IntegerField())
    environment = EnvironmentDiffSerializer(
        many=True, help_text="per device (and arch): what differs between the environments "
        "of the base's and the head's runs; an entry per job where they differ")
    rows = RowSerializer(many=True)


class Compare(APIView):
    @extend_schema(
        summary="Compare two commits",
        description="Every series with results at either commit: base and head values, "
        "relative change, and its state judged against the series' own history on the "
        "repo's default branch (tolerance, noise, Mann-Whitney U where both have 4+ "
        "repetitions) with the rule that decided; an overall verdict and counts. A model "
        "that fails (a value going to 0, an accuracy going from a pass to a failure, shown "
        "as 1 -> 0) or a benchmark cell that fails at the head (its `status`) is a "
        "`regression` whatever the noise. A unique "
        "prefix (7+ characters) of a stored sha names it. 404 with `cannot_compare` "
        "(unknown_repo, unknown_sha, short_sha, ambiguous_sha) when the commits cannot be "
        "compared. `fdr` holds the series judged on their history's noise to this false "
        f"discovery rate (0 < fdr <= {MAX_FDR:g}) instead of the detection settings' "
        "`compare_fdr`: higher finds an isolated change more often, and fails quiet "
        "comparisons of many series more often. CI's gate (`python -m runner gate`) fails a "
        "pull request on `regression`, and asks for another run of the head where a "
        "regression held back as `noisy` has an `adjusted_p` within its looser --confirm "
        "rate (`head_runs` counts the runs judged together). `environment` says, per "
        "device, what differs between the environments of the base's and the head's runs "
        "(torch, CUDA, driver, GPU, image, ...: each run's fingerprint; runs paired by job "
        "name): `state` `changed` lists the changes, `unknown` where a side has none "
        "recorded; the device filters narrow it. The gate prints it and, with "
        "--same-environment, cannot compare commits whose environments differ.",
        parameters=[OpenApiParameter(name, OpenApiTypes.STR, required=True)
                    for name in REQUIRED]
        + [OpenApiParameter(name, OpenApiTypes.STR, description="exact match")
           for name in FILTERS]
        + [OpenApiParameter("fdr", OpenApiTypes.FLOAT, description="false discovery rate "
                            f"over the comparison's series (0 < fdr <= {MAX_FDR:g}); default: "
                            "the detection settings' compare_fdr")],
        responses={200: ComparisonSerializer, 400: OpenApiTypes.OBJECT,
                   404: OpenApiTypes.OBJECT},
    )
    def get(self, request):
        params = request.query_params
        errors = [f"{name}: required" for name in REQUIRED if not params.get(name)]
        errors += [f"{name}: unknown parameter; known: {', '.join(KNOWN)}"
                   for name in params if name not in KNOWN]
        fdr = None
        if "fdr" in params:
            try:
                fdr = check_fdr(float(params["fdr"]))
            except ValueError:
                errors.append(f"fdr: a false discovery rate, above 0 and at most "
                              f"{MAX_FDR:g} (e.g. 0.05); got {params['fdr']!r}")
        if errors:
            return Response({"errors": errors}, status=400)
        filters = {name: params[name] for name in FILTERS if params.get(name)}
        try:
            comparison = recent_comparison(params["repo"], params["base"], params["head"],
                                           fdr=fdr, **filters)
        except CannotCompare as error:
            return Response({"errors": [str(error)], "cannot_compare": error.reason},
                            status=404)
        return HttpResponse(comparison.as_json(), content_type="application/json")
