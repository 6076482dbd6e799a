from django.apps import AppConfig

from benchsite import links
from dashboards import families


class DashboardsConfig(AppConfig):
    name = "dashboards"
    verbose_name = "Dashboards"

    def ready(self):
        """The family pages register where they are built (dashboards/pages/); a job's
        link to its family's page (benchsite.links) is then theirs to answer."""
        families.discover()
        links.serve_family_pages(families.job_link)
