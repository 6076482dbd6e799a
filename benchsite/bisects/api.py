"""`/api/v3/bisects`: start a bisect (from a regression, or a spec, a source and two
commits) or an A/B try job (a spec at a base and a head ref), list them, follow one."""

from __future__ import annotations

import django_filters
from django.db.models import Q
from drf_spectacular.extensions import OpenApiSerializerFieldExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response

from benchsite.access.repos import validate_repo
from benchsite.bisects.models import Bisect, describe
from benchsite.bisects.start import BisectRefused, find_source, start_regression, start_spec
from benchsite.jobs.api import CanSubmitJobs, NewestFirst, check_token_queue
from benchsite.regressions.models import Regression
from benchsite.results.api_query import IdFilter
from benchsite.results.tokens import SiteApiAccess, token_of

# The fields each kind takes besides spec, spec_name, source, cells and queue.
OWN = {Bisect.Kind.BISECT: ("regression", "good", "bad", "metric"),
       Bisect.Kind.AB: ("base", "head", "head_source")}


class StartSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(
        choices=Bisect.Kind.choices, default=Bisect.Kind.BISECT,
        help_text="bisect: find the commit between good and bad that changed one cell's "
                  "metric; ab: an A/B try job, the spec's cells at base and head, rounds "
                  "interleaved on one worker")
    regression = serializers.IntegerField(
        required=False, min_value=1, max_value=2**63 - 1,
        help_text="bisect: this regression (the spec and cell of the job that measured it, "
                  "its range); instead of spec + source + good + bad")
    spec = serializers.CharField(required=False, help_text="a spec (YAML)")
    spec_name = serializers.CharField(default="api.yml")
    source = serializers.CharField(
        required=False, help_text="a source of the admin, by name or id (an A/B's base's)")
    good = serializers.CharField(required=False, help_text="bisect: the good commit (or ref)")
    bad = serializers.CharField(required=False, help_text="bisect: the bad commit (or ref)")
    base = serializers.CharField(required=False, help_text="ab: the base ref")
    head = serializers.CharField(required=False, help_text="ab: the head ref")
    head_source = serializers.CharField(
        required=False, help_text="ab: the head's source when it is another one")
    cells = serializers.CharField(
        default="", allow_blank=True,
        help_text="a regular expression on the cells' keys: a bisect's must select one cell; "
                  "an A/B runs every cell it selects (empty: all)")
    metric = serializers.CharField(default="", allow_blank=True,
                                   help_text="bisect: default the cell's first numeric metric")
    queue = serializers.CharField(default="", allow_blank=True,
                                  help_text="default: cpu, or the regression's job's queue")

    def validate(self, data):
        kind = data["kind"] = Bisect.Kind(data["kind"]).value
        given = [key for key in self.initial_data if key in data]  # not the defaults
        other = [key for key in given
                 if key not in OWN[kind] and any(key in own for own in OWN.values())]
        if other:
            raise ValidationError(f"kind {kind!r}: does not take {', '.join(other)}")
        if kind == Bisect.Kind.AB:
            needed = ("spec", "source", "base", "head")
        elif "regression" in data:
            extra = [key for key in ("spec", "good", "bad") if key in data]
            if extra:
                raise ValidationError(f"give a regression, or spec + source + good + bad, "
                                      f"not both (also given: {', '.join(extra)})")
            return data
        else:
            needed = ("spec", "source", "good", "bad")
        missing = [key for key in needed if not data.get(key)]
        if missing:
            raise ValidationError(
                f"give {' + '.join(needed)}" + (" (or a regression id)" if kind == "bisect"
                                                 else "") + f" (missing: {', '.join(missing)})")
        return data


class StateField(serializers.CharField):
    """A bisect's state: in the schema, the enum component BisectStateEnum (named here: the
    compare API's rows have a `state` enum of their own)."""


class StateFieldSchema(OpenApiSerializerFieldExtension):
    target_class = StateField

    def map_serializer_field(self, auto_schema, direction):
        component = ResolvedComponent(
            name="BisectStateEnum", type=ResolvedComponent.SCHEMA, object="BisectStateEnum",
            schema={"type": "string", "enum": list(Bisect.State.values)})
        auto_schema.registry.register_on_missing(component)
        return component.ref


class BisectSerializer(serializers.Serializer):
    """Documents a bisect as the API shows it (`describe`); the list's items have no steps."""

    id = serializers.IntegerField()
    kind = serializers.ChoiceField(choices=Bisect.Kind.choices)
    url = serializers.CharField(help_text="its page")
    state = StateField()
    progress = serializers.CharField(help_text="what it does now")
    culprit_sha = serializers.CharField(help_text="a bisect's culprit, once found")
    outcome = serializers.JSONField(
        help_text="message, original_change, culprit {sha, subject, author, url, magnitude, "
                  "p_value}, candidates, skipped (each with its failure); an A/B's series "
                  "(base and head medians, change, p_value, significant, pairs: of rounds "
                  "that judged it, agree: on the sign) and series_rule (how they were judged)")
    source = serializers.CharField()
    repo = serializers.CharField(help_text="the source's repo")
    head_source = serializers.CharField(allow_null=True)
    regression = serializers.IntegerField(allow_null=True)
    spec_name = serializers.CharField()
    family = serializers.CharField()
    cells = serializers.ListField(child=serializers.CharField(), help_text="their keys")
    metric = serializers.CharField()
    good_ref = serializers.CharField(help_text="good end, or an A/B's base, as given")
    bad_ref = serializers.CharField(help_text="bad end, or an A/B's head, as given")
    good_sha = serializers.CharField()
    bad_sha = serializers.CharField()
    branch = serializers.CharField(help_text="the branch its runs are stored on")
    queue = serializers.CharField()
    commits_in_range = serializers.IntegerField()
    attempts = serializers.IntegerField(help_text="times a worker took it")
    created_at = serializers.DateTimeField()
    enqueued_at = serializers.DateTimeField(
        allow_null=True, help_text="when its task was last handed to the broker; empty while "
                                   "the broker could not take it (the sweeper queues it)")
    started_at = serializers.DateTimeField(allow_null=True)
    finished_at = serializers.DateTimeField(allow_null=True)

    def to_representation(self, instance):
        return describe(instance, steps=False)


class BisectDetailSerializer(BisectSerializer):
    steps = serializers.ListField(
        child=serializers.DictField(),
        help_text="each commit measured: position, sha, subject, verdict, rounds, values (a "
                  "bisect's: the followed metric's repetitions; an A/B's: by series), side "
                  "(A/B), failure (a skipped commit's)")

    def to_representation(self, instance):
        return describe(instance)


class BisectFilter(django_filters.FilterSet):
    repo = django_filters.CharFilter(method="of_repo", validators=[validate_repo],
                                     help_text="its source's (or head source's) repo")
    source = django_filters.CharFilter(field_name="source__name")
    regression = IdFilter(field_name="regression_id")

    class Meta:
        model = Bisect
        fields = ["state", "kind", "queue"]

    def of_repo(self, queryset, name, value):
        return queryset.filter(Q(source__repo=value) | Q(head_source__repo=value))


class CanStartBisects(CanSubmitJobs):
    """Bisects run code on the workers as jobs do: the same token scope, or a user allowed
    to add bisects."""

    user_permission = "bisects.add_bisect"


class BisectList(generics.ListAPIView):
    queryset = Bisect.objects.select_related("source", "head_source")
    serializer_class = BisectSerializer
    permission_classes = [SiteApiAccess, CanStartBisects]
    pagination_class = NewestFirst
    filterset_class = BisectFilter

    @extend_schema(summary="List bisects and try jobs",
                   description="Newest first, a page of 50 (cursor links); each without its "
                               "steps (GET /api/v3/bisects/ID has them).")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)

    @extend_schema(
        request=StartSerializer,
        responses={201: BisectDetailSerializer,
                   202: OpenApiResponse(BisectDetailSerializer, description=(
                       "recorded, but the broker could not take its task (`enqueued_at` "
                       "empty); the sweeper queues it when the broker is back"))},
        summary="Start a bisect or an A/B try job",
        description="A bisect: `{\"regression\": ID}`, or `{\"spec\", \"source\", \"good\", "
                    "\"bad\"}` (with `cells` selecting one cell). A try job: `{\"kind\": "
                    "\"ab\", \"spec\", \"source\", \"base\", \"head\"}`, `head_source` when the "
                    "head is another source's. Needs a token with the submit_jobs scope for "
                    "the source's (and head source's) repo and the queue, or a user with the "
                    "permission to add bisects.")
    def post(self, request):
        data = StartSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        values = data.validated_data
        token = token_of(request)
        user = request.user if request.user.is_authenticated else None

        def authorize(repo: str, queue: str) -> None:
            if token is not None and not token.allows(repo):
                raise PermissionDenied(f"token {token.name!r} may not run bisects for {repo!r}")
            check_token_queue(token, queue)

        try:
            source = find_source(values["source"]) if values.get("source") else None
            if values["kind"] == Bisect.Kind.AB:
                bisect = start_spec(
                    spec_yaml=values["spec"], spec_name=values["spec_name"], kind=values["kind"],
                    source=source, good=values["base"], bad=values["head"],
                    head_source=find_source(values["head_source"])
                    if values.get("head_source") else None,
                    cells=values["cells"], queue=values["queue"] or "cpu", via_api=True,
                    user=user, token=token, authorize=authorize)
            elif "regression" in values:
                regression = Regression.objects.select_related("series").filter(
                    pk=values["regression"]).first()
                if regression is None:
                    raise BisectRefused(f"regression {values['regression']}: no such regression")
                bisect = start_regression(regression, source=source, queue=values["queue"],
                                          via_api=True, user=user, token=token,
                                          authorize=authorize)
            else:
                bisect = start_spec(spec_yaml=values["spec"], spec_name=values["spec_name"],
                                    source=source, good=values["good"], bad=values["bad"],
                                    cells=values["cells"], metric=values["metric"],
                                    queue=values["queue"] or "cpu", via_api=True, user=user,
                                    token=token, authorize=authorize)
        except BisectRefused as error:
            raise ValidationError({"detail": str(error)}) from None
        bisect.refresh_from_db()
        queued = bisect.enqueued_at is not None or bisect.state != Bisect.State.PENDING
        return Response(describe(bisect),
                        status=status.HTTP_201_CREATED if queued else status.HTTP_202_ACCEPTED)


class BisectDetail(generics.RetrieveAPIView):
    queryset = Bisect.objects.select_related("source", "head_source")
    serializer_class = BisectDetailSerializer
    permission_classes = [SiteApiAccess]

    @extend_schema(summary="A bisect or try job, its outcome and its steps")
    def get(self, request, *args, **kwargs):
        return super().get(request, *args, **kwargs)
