from django.apps import AppConfig


class ResultsConfig(AppConfig):
    name = "benchsite.results"
    verbose_name = "Benchmark results"
