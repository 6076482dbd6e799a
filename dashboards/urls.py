from django.urls import path

from dashboards import views

app_name = "dashboards"
urlpatterns = [
    path("quantization/", views.quantization_page, name="quantization"),
    path("trends/", views.trends_page, name="trends"),
]
