from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from benchsite.jobs import api as jobs_api
from benchsite.regressions import api as regressions_api

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("recipes/", include("benchsite.catalog.urls")),
    path("api/v3/", include("benchsite.results.urls")),
    path("api/v3/jobs", jobs_api.JobList.as_view(), name="api-jobs"),
    path("api/v3/jobs/<int:pk>", jobs_api.JobDetail.as_view(), name="api-job"),
    path("api/v3/jobs/<int:pk>/cancel", jobs_api.JobCancel.as_view(), name="api-job-cancel"),
    path("jobs/", include("benchsite.jobs.urls")),
    path("regressions/", include("benchsite.regressions.urls")),
    path("api/v3/compare", regressions_api.Compare.as_view(), name="api-compare"),
    path("", include("dashboards.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
]
