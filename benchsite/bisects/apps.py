from django.apps import AppConfig


class BisectsConfig(AppConfig):
    name = "benchsite.bisects"
    verbose_name = "Bisection and try jobs"

    def ready(self) -> None:
        from benchsite.bisects import allowlist, confirm

        allowlist.connect()  # the sources' packages are allowed code modules
        confirm.connect()  # regressions are confirmed by A/B try jobs
