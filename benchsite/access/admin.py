from django.contrib import admin

from benchsite.access.forms import RepoScopeForm
from benchsite.access.models import BUILTIN_MODULES, AllowedCodeModule, RepoScope


@admin.register(AllowedCodeModule)
class AllowedCodeModuleAdmin(admin.ModelAdmin):
    list_display = ["module", "note", "added_by", "added_at"]
    search_fields = ["module", "note"]

    def changelist_view(self, request, extra_context=None):
        subtitle = f"always allowed: {', '.join(BUILTIN_MODULES)}"
        provided = AllowedCodeModule.provided()
        if provided:  # e.g. the packages of the sources registered for bisection
            subtitle += "; also allowed: " + "; ".join(
                f"{module} ({', '.join(why)})" for module, why in sorted(provided.items()))
        extra_context = {**(extra_context or {}), "subtitle": subtitle}
        return super().changelist_view(request, extra_context)

    def save_model(self, request, obj, form, change):
        if not change:
            obj.added_by = request.user
        super().save_model(request, obj, form, change)


@admin.register(RepoScope)
class RepoScopeAdmin(admin.ModelAdmin):
    form = RepoScopeForm
    list_display = ["user", "repos", "upload_repos"]
    autocomplete_fields = ["user"]
