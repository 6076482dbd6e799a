from django.apps import AppConfig


class ComparisonConfig(AppConfig):
    name = "benchsite.comparison"
    label = "comparison"
    verbose_name = "Comparison"
