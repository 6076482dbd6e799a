from django.contrib import admin, messages

from benchsite.jobs import tasks
from benchsite.jobs.models import Job, JobCell


class JobCellInline(admin.TabularInline):
    model = JobCell
    fields = ["index", "key", "status", "attempts", "worker", "heartbeat_at", "measured_s",
              "upload", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "name", "queue", "status", "cells_done", "cells_total",
                    "submitted_via", "submitted_by", "created_at", "finished_at"]
    list_filter = ["status", "queue", "submitted_via", "config"]
    search_fields = ["name", "head_sha"]
    readonly_fields = ["status", "cells_total", "cells_done", "created_at", "enqueued_at",
                       "started_at", "finished_at", "submitted_via", "submitted_by",
                       "submitted_token", "config"]
    inlines = [JobCellInline]
    actions = ["cancel_jobs"]

    def has_add_permission(self, request):
        return False  # jobs are submitted (API, `bench run`, schedules), not typed in

    @admin.action(description="Cancel the selected jobs (pending cells stop)")
    def cancel_jobs(self, request, queryset):
        cancelled = sum(tasks.cancel(job) for job in queryset.exclude(status__in=Job.ENDED))
        messages.info(request, f"{cancelled} pending cells cancelled")
