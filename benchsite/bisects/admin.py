"""Sources are made here (only admins: a source runs its code on the workers); bisects and
try jobs are shown, with their steps."""

from django.contrib import admin
from django.utils.html import format_html

from benchsite.bisects.models import Bisect, BisectStep, Source


@admin.register(Source)
class SourceAdmin(admin.ModelAdmin):
    list_display = ["name", "repo", "location", "mode", "modules", "created_at"]
    search_fields = ["name", "repo", "location", "modules"]
    fieldsets = [
        (None, {"fields": ["name", "location", "repo", "web_url"]}),
        ("Code job specs may name", {"fields": ["modules"],
                                     "description": "the packages its checkout provides are "
                                     "allowed code modules while this source exists; they "
                                     "are listed with the Allowed code modules."}),
        ("Building a commit", {"fields": ["mode", "build_command", "pythonpath", "env",
                                          "build_timeout_s"],
                               "description": "pythonpath: the checkout goes first on "
                               "PYTHONPATH (pure-Python packages). command: a virtualenv per "
                               "commit (--system-site-packages: torch is shared) in which the "
                               "build command runs."}),
    ]


class StepInline(admin.TabularInline):
    model = BisectStep
    extra = 0
    can_delete = False
    fields = ["position", "side", "sha", "subject", "verdict", "round_count", "failure"]
    readonly_fields = fields

    @admin.display(description="rounds")
    def round_count(self, step: BisectStep) -> int:
        return len(step.rounds)

    def has_add_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Bisect)
class BisectAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "state", "source", "good_ref", "bad_ref", "culprit_sha",
                    "created_at", "page"]
    list_filter = ["kind", "state", "source"]
    inlines = [StepInline]
    readonly_fields = [field.name for field in Bisect._meta.fields]

    @admin.display(description="page")
    def page(self, bisect: Bisect) -> str:
        return format_html('<a href="{}">open</a>', bisect.get_absolute_url())

    def has_add_permission(self, request) -> bool:
        return False  # started from a regression, the API or `manage.py bench bisect`
