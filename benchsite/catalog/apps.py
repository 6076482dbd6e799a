from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "benchsite.catalog"
    verbose_name = "Recipes and benchmark configs"
