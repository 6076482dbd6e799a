from django.apps import AppConfig


class BisectsConfig(AppConfig):
    name = "benchsite.bisects"
    verbose_name = "Bisection and try jobs"
