"""The Django project: settings, URLs, the Celery app and the apps."""

from benchsite.celery import app as celery_app

__all__ = ["celery_app"]
