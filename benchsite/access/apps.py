from django.apps import AppConfig


class AccessConfig(AppConfig):
    name = "benchsite.access"
    verbose_name = "Access: login and roles"
