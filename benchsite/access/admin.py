from django.contrib import admin

from benchsite.access.forms import RepoScopeForm
from benchsite.access.models import BUILTIN_MODULES, AllowedCodeModule, RepoScope


@admin.register(AllowedCodeModule)
class AllowedCodeModuleAdmin(admin.ModelAdmin):
    list_display = ["module", "note", "added_by", "added_at"]
    search_fields = ["module", "note"]

    def changelist_view(self, request, extra_context=None):
        extra_context = {**(extra_context or {}),
                         "subtitle": f"always allowed: {', '.join(BUILTIN_MODULES)}"}
        return super().changelist_view(request, extra_context)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.added_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(RepoScope)
class RepoScopeAdmin(admin.ModelAdmin):
    form = RepoScopeForm
    list_display = ["user", "repos"]
    autocomplete_fields = ["user"]
