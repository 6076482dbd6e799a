from django.contrib import admin, messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils.html import format_html

from benchsite.results.models import Result, Run, Series, Upload, UploadToken


@admin.register(UploadToken)
class UploadTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "prefix", "repos", "is_active", "created_by", "created_at",
                    "last_used_at"]
    list_filter = ["is_active"]
    readonly_fields = ["prefix", "created_by", "created_at", "last_used_at"]
    fields = ["name", "repos", "is_active", *readonly_fields]

    def save_model(self, request, obj, form, change):
        if not change:
            secret = obj.issue()
            obj.created_by = request.user
            messages.warning(
                request,
                f"Upload token for {obj.name}: {secret} — copy it now, it is not shown again.",
            )
        super().save_model(request, obj, form, change)


@admin.register(Upload)
class UploadAdmin(admin.ModelAdmin):
    list_display = ["id", "created_at", "source", "repos", "record_count", "token"]
    list_filter = ["source"]
    search_fields = ["idempotency_key", "content_hash"]
    exclude = ["payload_gzip"]
    readonly_fields = ["created_at", "source", "token", "idempotency_key", "content_hash",
                       "request_metadata", "record_count", "repos", "payload_link"]
    show_full_result_count = False

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    @admin.display(description="raw payload")
    def payload_link(self, obj):
        return format_html('<a href="{}">download (gzip)</a>',
                           reverse("admin:results_upload_payload", args=[obj.pk]))

    def get_urls(self):
        return [
            path("<int:pk>/payload/", self.admin_site.admin_view(self.payload_view),
                 name="results_upload_payload"),
            *super().get_urls(),
        ]

    def payload_view(self, request, pk):
        upload = get_object_or_404(Upload, pk=pk)
        response = HttpResponse(bytes(upload.payload_gzip), content_type="application/gzip")
        response["Content-Disposition"] = f'attachment; filename="upload-{pk}.json.gz"'
        return response


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "repo", "head_branch", "head_sha", "name", "device", "arch",
                    "timestamp", "result_count"]
    list_filter = ["repo", "head_branch", "device"]
    search_fields = ["head_sha", "name"]
    raw_id_fields = ["upload"]
    readonly_fields = ["identity", "result_count"]
    date_hierarchy = "timestamp"
    show_full_result_count = False


@admin.register(Series)
class SeriesAdmin(admin.ModelAdmin):
    list_display = ["id", "repo", "benchmark", "model", "backend", "mode", "dtype", "device",
                    "arch", "metric"]
    list_filter = ["repo", "benchmark", "device"]
    search_fields = ["model", "metric", "benchmark"]
    readonly_fields = ["identity"]
    show_full_result_count = False


@admin.register(Result)
class ResultAdmin(admin.ModelAdmin):
    list_display = ["id", "timestamp", "series", "value", "target", "run"]
    list_select_related = ["series", "run"]
    raw_id_fields = ["series", "run", "upload"]
    date_hierarchy = "timestamp"
    show_full_result_count = False
