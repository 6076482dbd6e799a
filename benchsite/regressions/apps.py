from django.apps import AppConfig


class RegressionsConfig(AppConfig):
    name = "benchsite.regressions"
    verbose_name = "Regressions"

    def ready(self) -> None:
        from benchsite.regressions import receivers  # noqa: F401  (connects the receiver)
