from django.contrib import admin
from django.urls import include, path

from dashboards import errors, favicon
from dashboards import urls as pages

urlpatterns = [
    path("favicon.ico", favicon.favicon),
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("benchsite.api_urls")),
    path("recipes/", include((pages.recipes, "catalog"))),
    path("jobs/", include((pages.jobs, "jobs"))),
    path("regressions/", include((pages.regressions, "regressions"))),
    path("", include(pages)),
]

handler400 = errors.bad_request
handler404 = errors.not_found
handler500 = errors.server_error
