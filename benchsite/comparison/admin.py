from django.contrib import admin

from benchsite.comparison.directions import without_override
from benchsite.comparison.models import MetricDirection


@admin.register(MetricDirection)
class MetricDirectionAdmin(admin.ModelAdmin):
    list_display = ["metric", "benchmark", "direction", "without_override"]
    search_fields = ["metric", "benchmark"]
    readonly_fields = ["without_override"]

    @admin.display(description="without this override")
    def without_override(self, obj):
        if not obj.metric:
            return "—"
        found = without_override(obj.metric, obj.benchmark)
        return f"{found.better or 'unknown'} ({found.rule})"
