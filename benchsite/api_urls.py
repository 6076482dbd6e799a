"""Every API route: `/api/v3/...` (results, runs, uploads, jobs, compare) and the OpenAPI
schema and docs. Mounted once, under `api/`, by benchsite.urls."""

from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from benchsite.bisects import api as bisects
from benchsite.jobs import api as jobs
from benchsite.regressions import api as regressions
from benchsite.results import api_query
from benchsite.results.api import ResultsCollection

urlpatterns = [
    path("v3/results", ResultsCollection.as_view(), name="results"),
    path("v3/runs", api_query.RunList.as_view(), name="runs"),
    path("v3/runs/<int:pk>", api_query.RunDetail.as_view(), name="run"),
    path("v3/uploads/<int:pk>", api_query.UploadDetail.as_view(), name="upload"),
    path("v3/environment-changes", api_query.EnvironmentChangeList.as_view(),
         name="environment-changes"),
    path("v3/jobs", jobs.JobList.as_view(), name="api-jobs"),
    path("v3/jobs/<int:pk>", jobs.JobDetail.as_view(), name="api-job"),
    path("v3/jobs/<int:pk>/cancel", jobs.JobCancel.as_view(), name="api-job-cancel"),
    path("v3/compare", regressions.Compare.as_view(), name="api-compare"),
    path("v3/bisects", bisects.BisectList.as_view(), name="api-bisects"),
    path("v3/bisects/<int:pk>", bisects.BisectDetail.as_view(), name="api-bisect"),
    path("schema/", SpectacularAPIView.as_view(), name="schema"),
    # Swagger UI's script is served from `docs/?script`, not inline: the site's
    # Content-Security-Policy allows no inline script without its nonce.
    path("docs/", SpectacularSwaggerSplitView.as_view(url_name="schema"), name="api-docs"),
]
