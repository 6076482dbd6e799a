from django.urls import path

from benchsite.regressions import views

app_name = "regressions"
urlpatterns = [
    path("", views.regression_list, name="list"),
    path("<int:pk>/", views.regression_detail, name="detail"),
    path("<int:pk>/triage", views.regression_triage, name="triage"),
]
