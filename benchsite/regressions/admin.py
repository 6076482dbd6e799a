from django.contrib import admin, messages
from django.db.models import Count, Q
from django.shortcuts import redirect
from django.urls import reverse
from django.utils import timezone

from benchsite.regressions.groups import triage_members
from benchsite.regressions.models import (
    AlertGroup,
    DetectionSettings,
    MetricThreshold,
    NotificationTarget,
    Regression,
    RegressionEvent,
    SilenceAlert,
)


class RegressionEventInline(admin.TabularInline):
    model = RegressionEvent
    fields = ["created_at", "user", "from_state", "to_state", "note"]
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


def _state_action(state: str, label: str):
    def action(modeladmin, request, queryset):
        changed = sum(regression.triage(state, request.user, "changed in the admin")
                      for regression in queryset)
        messages.info(request, f"{changed} regression(s) marked {label}")

    action.__name__ = f"mark_{state}"
    return admin.action(description=f"Mark the selected regressions {label}")(action)


@admin.register(Regression)
class RegressionAdmin(admin.ModelAdmin):
    list_display = ["id", "first_bad_at", "kind", "series", "magnitude", "detector", "state",
                    "confirmation", "first_bad_sha"]
    list_filter = ["state", "confirmation", "kind", "detector", "series__repo", "series__benchmark",
                   "series__arch"]
    list_select_related = ["series"]
    search_fields = ["first_bad_sha", "last_good_sha", "series__model", "series__metric"]
    raw_id_fields = ["series", "last_good_run", "first_bad_run"]
    readonly_fields = ["series", "branch", "group", "detector", "kind", "direction",
                       "direction_rule", "last_good_run", "last_good_sha", "last_good_at",
                       "first_bad_run", "first_bad_sha", "first_bad_at", "baseline", "value",
                       "magnitude", "confidence", "points_after", "detected_at", "evidence",
                       "state", "confirmation", "confirmation_note", "held_until", "culprit",
                       "notified_at", "created_at", "updated_at"]
    fields = [*readonly_fields, "notes"]
    inlines = [RegressionEventInline]
    date_hierarchy = "first_bad_at"
    show_full_result_count = False
    actions = [_state_action(state, label) for state, label in Regression.State.choices]

    def has_add_permission(self, request):
        return False  # detectors raise them


class MemberInline(admin.TabularInline):
    model = Regression
    fk_name = "group"
    fields = ["series", "kind", "detector", "magnitude", "first_bad_sha", "state"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = True
    verbose_name = "member"

    def has_add_permission(self, request, obj=None):
        return False

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("series")


def _group_state_action(state: str, label: str):
    def action(modeladmin, request, queryset):
        members = Regression.objects.filter(group__in=queryset).order_by("pk")
        changed = triage_members(members, state, request.user, "changed in the admin")
        messages.info(request, f"{changed} member regression(s) marked {label}")

    action.__name__ = f"mark_members_{state}"
    return admin.action(description=f"Mark every member of the selected groups {label}")(
        action)


@admin.register(AlertGroup)
class AlertGroupAdmin(admin.ModelAdmin):
    list_display = ["id", "first_bad_at", "repo", "branch", "last_good_sha", "first_bad_sha",
                    "members", "regressions", "current", "notified_at"]
    list_filter = ["repo", "branch"]
    search_fields = ["first_bad_sha", "last_good_sha"]
    readonly_fields = ["repo", "branch", "last_good_sha", "last_good_at", "first_bad_sha",
                       "first_bad_at", "created_at", "notified_at"]
    inlines = [MemberInline]
    date_hierarchy = "first_bad_at"
    show_full_result_count = False
    actions = [_group_state_action(state, label) for state, label in Regression.State.choices]

    def has_add_permission(self, request):
        return False  # detection makes them

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(
            member_count=Count("members"),
            regression_count=Count("members", filter=Q(
                members__kind=Regression.Kind.REGRESSION)),
            current_count=Count("members", filter=Q(members__state__in=Regression.CURRENT)))

    @admin.display(description="members", ordering="member_count")
    def members(self, obj):
        return obj.member_count

    @admin.display(description="regressions", ordering="regression_count")
    def regressions(self, obj):
        return obj.regression_count

    @admin.display(description="open or acknowledged", ordering="current_count")
    def current(self, obj):
        return obj.current_count


class MetricThresholdInline(admin.TabularInline):
    model = MetricThreshold
    fields = ["position", "metric", "benchmark", "tolerance", "statistic",
              "changepoint_min_magnitude"]
    extra = 1


@admin.register(DetectionSettings)
class DetectionSettingsAdmin(admin.ModelAdmin):
    inlines = [MetricThresholdInline]
    fieldsets = [
        ("Change point", {"fields": ["changepoint_enabled", "history_points", "before",
                                     "min_after", "min_magnitude", "significance"]}),
        ("HUD policy", {"fields": ["hud_enabled", "baseline_points", "comparison_points",
                                   "baseline_statistic", "default_tolerance"]}),
        ("Commit comparison", {"fields": ["compare_significance", "compare_fdr"]}),
        ("Stopped reporting", {"fields": ["silence_gaps", "silence_min_runs",
                                          "silence_lookback_days"]}),
        ("Confirmation before alerting", {"fields": ["confirm_mode",
                                                     "confirm_time_limit_minutes",
                                                     "confirm_auto_bisect"]}),
    ]

    def has_add_permission(self, request):
        return False  # one row, made by `load()`

    def has_delete_permission(self, request, obj=None):
        return False

    def changelist_view(self, request, extra_context=None):
        """Straight to the one row's form."""
        row = DetectionSettings.load()
        return redirect(reverse("admin:regressions_detectionsettings_change", args=[row.pk]))


@admin.register(NotificationTarget)
class NotificationTargetAdmin(admin.ModelAdmin):
    list_display = ["name", "kind", "url", "email", "repo", "benchmark", "enabled"]
    list_filter = ["kind", "enabled"]


@admin.register(SilenceAlert)
class SilenceAlertAdmin(admin.ModelAdmin):
    list_display = ["id", "repo", "arch", "device", "series", "last_seen", "usual_gap",
                    "created_at", "resolved_at"]
    list_filter = ["repo", "arch"]
    raw_id_fields = ["series"]
    readonly_fields = ["key", "repo", "device", "arch", "series", "last_seen", "usual_gap",
                       "runs_seen", "created_at", "notified_at"]
    actions = ["resolve"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Resolve the selected alerts")
    def resolve(self, request, queryset):
        resolved = queryset.filter(resolved_at__isnull=True).update(resolved_at=timezone.now())
        messages.info(request, f"{resolved} alert(s) resolved")
