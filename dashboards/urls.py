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
    re_path(r"^compare/(?P<base>[^/.]+)\.\.\.(?P<head>[^/.]+)/?$", views.compare_page,
            name="compare"),
    path("", views.home_page, name="home"),
]
