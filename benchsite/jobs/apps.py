from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "benchsite.jobs"
    verbose_name = "Benchmark jobs"
