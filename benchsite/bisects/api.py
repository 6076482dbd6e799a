"""`/api/v3/bisects`: start a bisect (from a regression, or a spec, a source and two
commits) and follow it."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from benchsite.bisects.models import Bisect, describe
from benchsite.bisects.start import BisectRefused, find_source, start_regression, start_spec
from benchsite.jobs.api import CanSubmitJobs, check_token_queue
from benchsite.regressions.models import Regression
from benchsite.results.tokens import SiteApiAccess, token_of


class StartSerializer(serializers.Serializer):
    regression = serializers.IntegerField(required=False, help_text="bisect this regression")
    spec = serializers.CharField(required=False, help_text="or: a spec (YAML) ...")
    spec_name = serializers.CharField(default="api.yml")
    source = serializers.CharField(required=False,
                                   help_text="a source of the admin, by name or id")
    good = serializers.CharField(required=False)
    bad = serializers.CharField(required=False)
    cells = serializers.CharField(default="", allow_blank=True,
                                  help_text="a regular expression selecting one cell's key")
    metric = serializers.CharField(default="", allow_blank=True,
                                   help_text="default: the cell's first numeric metric")
    queue = serializers.CharField(default="", allow_blank=True,
                                  help_text="default: cpu, or the regression's job's queue")

    def validate(self, data):
        if "regression" in data:
            extra = [key for key in ("spec", "good", "bad") if key in data]
            if extra:
                raise ValidationError(f"give a regression, or spec + source + good + bad, "
                                      f"not both (also given: {', '.join(extra)})")
            return data
        missing = [key for key in ("spec", "source", "good", "bad") if not data.get(key)]
        if missing:
            raise ValidationError(f"give a regression id, or spec + source + good + bad "
                                  f"(missing: {', '.join(missing)})")
        return data


class CanStartBisects(CanSubmitJobs):
    """Bisects run code on the workers as jobs do: the same token scope, or a user allowed
    to add bisects."""

    user_permission = "bisects.add_bisect"


class BisectList(APIView):
    permission_classes = [SiteApiAccess, CanStartBisects]

    @extend_schema(request=StartSerializer, responses={201: OpenApiResponse(
        description="the bisect (as GET /api/v3/bisects/ID)")}, summary="Start a bisect")
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
            if "regression" in values:
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
        return Response(describe(bisect), status=status.HTTP_201_CREATED)


class BisectDetail(generics.GenericAPIView):
    queryset = Bisect.objects.select_related("source", "head_source")
    permission_classes = [SiteApiAccess]

    @extend_schema(responses={200: OpenApiResponse(description="the bisect, its outcome and "
                                                               "its steps")},
                   summary="A bisect or try job")
    def get(self, request, pk: int):
        return Response(describe(self.get_object()))
