from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from benchsite.access.forms import RepoPatternsField
from benchsite.access.models import RepoScope
from benchsite.results.ingest import delete_uploads
from benchsite.results.models import Result, Run, Series, Upload, UploadToken

DOWNLOAD_PAYLOAD = "results.download_payload"
ADD_JOB = "jobs.add_job"


class UploadTokenForm(forms.ModelForm):
    repos = RepoPatternsField(help_text="OWNER/NAME, OWNER/* or *, one a line")
    scopes = forms.MultipleChoiceField(choices=UploadToken.Scope.choices,
                                       widget=forms.CheckboxSelectMultiple,
                                       initial=[UploadToken.Scope.UPLOAD])
    queues = forms.MultipleChoiceField(
        choices=[], required=False, widget=forms.CheckboxSelectMultiple,
        help_text="the queues it may submit jobs to (with submit_jobs)")

    class Meta:
        model = UploadToken
        fields = ["name", "repos", "scopes", "queues", "is_active"]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        known = list(settings.BENCH_QUEUES)
        known += [queue for queue in (self.instance.queues or []) if queue not in known]
        self.fields["queues"].choices = [(queue, queue) for queue in known]

    user = None  # who edits: set by UploadTokenAdmin.get_form

    def clean(self):
        cleaned = super().clean()
        if cleaned.get("is_active") and (
                ungrantable := RepoScope.ungrantable(self.user, cleaned.get("repos", []))):
            # an uploader must not mint a token that uploads where they may not themselves
            self.add_error("repos", f"you may not give a token {', '.join(ungrantable)}: "
                                    "each repo must be covered by the repos you may mint "
                                    "upload tokens for (your repo scope, set by an admin)")
        granting = UploadToken.Scope.SUBMIT_JOBS in cleaned.get("scopes", [])
        if granting and not cleaned.get("queues"):
            self.add_error("queues", "a token with submit_jobs needs at least one queue")
        if granting and not self.user.has_perm(ADD_JOB):
            # an uploader must not mint a token that does more than they may do themselves
            self.add_error("scopes", f"only users who may submit jobs ({ADD_JOB}) may give "
                                     "a token the submit_jobs scope")
        if UploadToken.Scope.RUN_CODE in cleaned.get("scopes", []):
            if not granting:
                self.add_error("scopes", "run_code only widens submit_jobs: give both")
            if not self.user.is_superuser:
                # only a superuser may send a spec's own Python through the API themselves
                self.add_error("scopes", "only superusers may give a token the run_code scope")
        return cleaned


@admin.register(UploadToken)
class UploadTokenAdmin(admin.ModelAdmin):
    form = UploadTokenForm
    list_display = ["name", "prefix", "repos", "scopes", "queues", "is_active", "created_by",
                    "created_at", "last_used_at"]
    list_filter = ["is_active"]
    readonly_fields = ["prefix", "created_by", "created_at", "last_used_at"]
    fields = ["name", "repos", "scopes", "queues", "is_active", *readonly_fields]

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change, **kwargs)  # a new class per request
        form.user = request.user
        return form

    def save_model(self, request, obj, form, change):
        if not change:
            secret = obj.issue()
            obj.created_by = request.user
            messages.warning(
                request,
                f"Upload token for {obj.name}: {secret} — copy it now, it is not shown again.",
            )
        super().save_model(request, obj, form, change)


class DetectionFilter(admin.SimpleListFilter):
    """Where an upload's regression detection stands (BENCH_DETECTION_MAX_ATTEMPTS)."""

    title = "regression detection"
    parameter_name = "detection"

    def lookups(self, request, model_admin):
        return [("owed", "owed (queued, not done yet)"),
                ("failing", "failed, to be retried"),
                ("given_up", "given up (failed every attempt)")]

    def queryset(self, request, queryset):
        if self.value() == "owed":
            return queryset.filter(detection_owed_at__isnull=False)
        if self.value() == "failing":
            return queryset.filter(detection_owed_at__isnull=False).exclude(detection_error="")
        if self.value() == "given_up":
            return queryset.filter(detection_owed_at__isnull=True).exclude(detection_error="")
        return queryset


@admin.register(Upload)
class UploadAdmin(admin.ModelAdmin):
    list_display = ["id", "created_at", "source", "repos", "record_count", "token",
                    "detection"]
    list_filter = ["source", DetectionFilter]
    search_fields = ["idempotency_key", "content_hash"]
    exclude = ["payload_gzip"]
    readonly_fields = ["created_at", "source", "token", "idempotency_key", "content_hash",
                       "request_metadata", "record_count", "repos", "detection_owed_at",
                       "detection_attempts", "detection_error"]
    actions = ["detect_again"]
    show_full_result_count = False

    @admin.display(description="detection")
    def detection(self, obj: Upload) -> str:
        last_line = obj.detection_error.strip().splitlines()[-1:] or [""]
        if obj.detection_owed_at is None:
            return (f"given up after {obj.detection_attempts} attempts: {last_line[0]}"
                    if obj.detection_error else "")
        if obj.detection_error:
            return f"failed {obj.detection_attempts}x, to be retried: {last_line[0]}"
        return "owed"

    @admin.action(description="Detect regressions again (the sweeper queues it within "
                              "BENCH_SWEEP_INTERVAL s; attempts start over)")
    def detect_again(self, request, queryset):
        # Overdue at once: the detection sweeper (regressions.tasks.detect_owed) takes it.
        overdue = timezone.now() - timedelta(seconds=settings.BENCH_DETECTION_RETRY_AFTER + 1)
        count = queryset.update(detection_owed_at=overdue, detection_attempts=0,
                                detection_error="")
        self.message_user(request, f"{count} upload(s) owe detection again.", messages.SUCCESS)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def delete_model(self, request, obj):
        delete_uploads([obj.pk])

    def delete_queryset(self, request, queryset):
        delete_uploads(queryset.values_list("pk", flat=True))

    @staticmethod
    def may_download(request, upload: Upload) -> bool:
        """The download permission, and every repo of the upload in the user's repo scope."""
        return (request.user.has_perm(DOWNLOAD_PAYLOAD)
                and RepoScope.allows(request.user, upload.repos))

    @admin.display(description="raw payload")
    def payload_link(self, obj):
        return format_html('<a href="{}">download (gzip)</a>',
                           reverse("admin:results_upload_payload", args=[obj.pk]))

    @admin.display(description="raw payload")
    def payload_refused(self, obj):
        return (f"downloading needs the {DOWNLOAD_PAYLOAD} permission and the repos "
                f"{obj.repos} in your repo scope")

    def get_readonly_fields(self, request, obj=None):
        fields = list(super().get_readonly_fields(request, obj))
        if obj is not None:
            fields.append("payload_link" if self.may_download(request, obj)
                          else "payload_refused")
        return fields

    def get_urls(self):
        return [
            path("<int:pk>/payload/", self.admin_site.admin_view(self.payload_view),
                 name="results_upload_payload"),
            *super().get_urls(),
        ]

    def payload_view(self, request, pk):
        upload = get_object_or_404(Upload, pk=pk)
        if not self.may_download(request, upload):
            raise PermissionDenied(f"upload {pk}: downloading its payload needs the "
                                   f"{DOWNLOAD_PAYLOAD} permission and its repos "
                                   f"{upload.repos} in your repo scope")
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
    # measured, and stored null for one repetition (Result.values): shown, never edited
    exclude = ["values"]
    readonly_fields = ["repetitions"]
