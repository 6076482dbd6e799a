"""The HTML pages' routes. The jobs, regressions and recipes pages keep the URL namespaces
their models' get_absolute_url and the templates name ("jobs:detail", "regressions:list",
"catalog:recipes"): benchsite.urls mounts each list under its prefix and namespace."""

from django.urls import path, re_path

from dashboards import views

app_name = "dashboards"
urlpatterns = [
    path("quantization/", views.quantization_page, name="quantization"),
    path("kernels/", views.kernels_page, name="kernels"),
    path("instructions/", views.instructions_page, name="instructions"),
    path("compilers/", views.compilers_page, name="compilers"),
    path("compilers/models/", views.compiler_models_page, name="compiler-models"),
    path("trends/", views.trends_page, name="trends"),
    path("explorer/", views.explorer_page, name="explorer"),
    path("runs/<int:pk>/", views.run_page, name="run"),
    path("bisects/<int:pk>/", views.bisect_page, name="bisect"),
    path("compare/", views.compare_latest, name="compare-latest"),
    re_path(r"^compare/(?P<base>[^/.]+)\.\.\.(?P<head>[^/.]+)/?$", views.compare_page,
            name="compare"),
    path("", views.home_page, name="home"),
]

jobs = [
    path("", views.jobs_page, name="list"),
    path("<int:pk>/", views.job_page, name="detail"),
]

regressions = [
    path("", views.regressions_page, name="list"),
    path("<int:pk>/", views.regression_page, name="detail"),
    path("<int:pk>/triage", views.regression_triage, name="triage"),
    path("<int:pk>/bisect", views.regression_bisect, name="bisect"),
    path("triage", views.bulk_triage, name="bulk-triage"),
    path("groups/<int:pk>/", views.group_page, name="group"),
    path("groups/<int:pk>/triage", views.group_triage, name="group-triage"),
    path("groups/<int:pk>/bisect", views.group_bisect, name="group-bisect"),
    path("reports/", views.reports_page, name="reports"),
    path("reports/<int:pk>/", views.report_page, name="report"),
]

recipes = [
    path("", views.recipes_page, name="recipes"),
]
