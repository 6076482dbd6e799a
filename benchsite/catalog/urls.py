from django.urls import path

from benchsite.catalog import views

app_name = "catalog"
urlpatterns = [
    path("", views.recipes_page, name="recipes"),
]
