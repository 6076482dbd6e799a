"""Recipes and benchmark configs in the admin: validation on save, versions and restore,
YAML import/export, "Run now" (through benchsite.jobs.submit) and nightly schedules."""

from __future__ import annotations

import difflib
import io
import zipfile
from dataclasses import asdict

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from benchsite import links
from benchsite.catalog import schedules, versions
from benchsite.catalog.configs import check_config
from benchsite.catalog.forms import ConfigForm, ImportForm, RecipeForm, RunForm, ScheduleForm
from benchsite.catalog.models import BenchmarkConfig, ConfigVersion, Recipe
from benchsite.catalog.results import latest_commit
from benchsite.catalog.run import run_config
from benchsite.catalog.transfer import config_name, export_config, import_config
from benchsite.jobs.models import Job
from benchsite.jobs.submit import JobRefused
from runner.engine.specs import SpecError

FORM_PAGE = "admin/catalog/form_page.html"


@admin.register(Recipe)
class RecipeAdmin(admin.ModelAdmin):
    form = RecipeForm
    list_display = ["name", "kind", "enabled", "config", "requirements_text", "checked_with",
                    "updated_at"]
    list_filter = ["kind", "enabled"]
    search_fields = ["name", "config", "description"]
    actions = ["enable", "disable"]
    fieldsets = [
        (None, {"fields": ["name", "enabled", "description", "kind", "requirements_text"]}),
        ("Custom recipe: a torchao config class and its arguments",
         {"fields": ["config", "kwargs", "sparsify"]}),
        ("What a machine needs (custom recipes; built-in ones have the registry's)",
         {"fields": ["devices", "min_capability", "packages"]}),
        ("Last saved", {"fields": ["checked_with", "updated_at", "updated_by"]}),
    ]

    def get_readonly_fields(self, request, obj=None):
        fields = ["kind", "requirements_text", "checked_with", "updated_at", "updated_by"]
        return ["name", *fields] if obj else fields  # configs name recipes: no renaming

    @admin.display(description="requirements")
    def requirements_text(self, obj):
        return obj.requirements_text if obj.kind else "—"

    def save_model(self, request, obj, form, change):
        obj.updated_by = request.user
        super().save_model(request, obj, form, change)
        if form.check and form.check.note:
            messages.warning(request, f"{obj.name}: {form.check.note}")

    @admin.action(description="Enable the selected recipes", permissions=["change"])
    def enable(self, request, queryset):
        messages.info(request, f"{queryset.update(enabled=True)} recipes enabled")

    @admin.action(description="Disable the selected recipes (configs using them are refused)",
                  permissions=["change"])
    def disable(self, request, queryset):
        messages.info(request, f"{queryset.update(enabled=False)} recipes disabled")


class ConfigVersionInline(admin.TabularInline):
    model = ConfigVersion
    fields = ["number", "created_at", "created_by", "note", "restore"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    verbose_name_plural = "versions (every change, newest first)"

    def has_add_permission(self, request, obj=None):
        return False

    @admin.display(description="")
    def restore(self, obj):
        url = reverse("admin:catalog_benchmarkconfig_restore", args=[obj.config_id, obj.number])
        return format_html('<a href="{}">compare / restore</a>', url)


@admin.register(BenchmarkConfig)
class BenchmarkConfigAdmin(admin.ModelAdmin):
    form = ConfigForm
    list_display = ["name", "description", "updated_at", "updated_by"]
    search_fields = ["name", "description", "spec_yaml"]
    inlines = [ConfigVersionInline]
    actions = ["run_now", "export_yaml"]
    change_form_template = "admin/catalog/benchmarkconfig/change_form.html"
    change_list_template = "admin/catalog/benchmarkconfig/change_list.html"

    def get_fieldsets(self, request, obj=None):
        fieldsets = [(None, {"fields": ["name", "description", "spec_yaml", "timing"]})]
        if obj:
            fieldsets += [
                ("Check, runs and results",
                 {"fields": ["validation", "latest_results", "recent_jobs", "schedule_list"]}),
                ("Saved", {"fields": ["created_at", "updated_at", "updated_by"]}),
            ]
        return fieldsets

    def get_readonly_fields(self, request, obj=None):
        fields = ["validation", "latest_results", "recent_jobs", "schedule_list", "created_at",
                  "updated_at", "updated_by"]
        return ["name", *fields] if obj else fields  # jobs and schedules go by the name

    def save_model(self, request, obj, form, change):
        obj.updated_by = request.user
        super().save_model(request, obj, form, change)
        version = versions.record(obj, request.user,
                                  note=f"{'edited' if change else 'created'} in the admin")
        if form.check:
            saved = f"version {version.number} saved. " if version else "No change. "
            messages.info(request, saved + " ".join(form.check.lines()))

    @admin.display(description="check (against the catalog and queues now)")
    def validation(self, obj):
        try:
            lines = check_config(obj.spec_yaml, obj.name).lines()
        except SpecError as error:
            lines = ["Cannot run now:", *error.problems]
        return format_html_join("", "<div>{}</div>", ((line,) for line in lines))

    @admin.display(description="latest results")
    def latest_results(self, obj):
        commit = latest_commit(obj)
        if commit is None:
            return "no results yet"
        url = links.family_page_url("quantization", **asdict(commit))
        return format_html('<a href="{}">on the quantization page</a>', url)

    @admin.display(description="jobs")
    def recent_jobs(self, obj):
        jobs = obj.jobs.order_by("-created_at")[:10]
        rows = format_html_join(
            "", '<div><a href="{}">job {}</a>: {}, queue {}, {} ({}/{} cells)</div>',
            ((job.get_absolute_url(), job.pk, job.status, job.queue,
              job.created_at.strftime("%Y-%m-%d %H:%M"), job.cells_done, job.cells_total)
             for job in jobs))
        every = reverse("admin:jobs_job_changelist") + f"?config__id__exact={obj.pk}"
        return format_html('{}<div><a href="{}">all its jobs</a></div>', rows, every) \
            if jobs else "none yet"

    @admin.display(description="schedules")
    def schedule_list(self, obj):
        tasks = schedules.schedules_of(config=obj.name)
        if not tasks:
            return "none"
        return format_html_join("", '<div><a href="{}">{}</a>: {} UTC{}</div>', (
            (reverse("admin:django_celery_beat_periodictask_change", args=[task.pk]),
             task.name, task.crontab, "" if task.enabled else " (disabled)") for task in tasks))

    def get_urls(self):
        def view(function, route, name):
            return path(route, self.admin_site.admin_view(function),
                        name=f"catalog_benchmarkconfig_{name}")

        return [
            view(self.import_view, "import/", "import"),
            view(self.run_view, "<int:pk>/run/", "run"),
            view(self.schedule_view, "<int:pk>/schedule/", "schedule"),
            view(self.export_view, "<int:pk>/export/", "export"),
            view(self.restore_view, "<int:pk>/restore/<int:number>/", "restore"),
            *super().get_urls(),
        ]

    def _page(self, request, title, form, **context):
        return TemplateResponse(request, FORM_PAGE, {
            **self.admin_site.each_context(request), "opts": self.model._meta,
            "title": title, "form": form, **context})

    def _change_url(self, config):
        return reverse("admin:catalog_benchmarkconfig_change", args=[config.pk])

    def _config(self, request, pk, permission):
        config = get_object_or_404(BenchmarkConfig, pk=pk)
        if not request.user.has_perm(permission):
            raise PermissionDenied
        return config

    # Run now: the list action (an intermediate page) and the change form's button.

    def has_run_permission(self, request):
        return request.user.has_perm("jobs.add_job")

    @admin.action(description="Run the selected configs now", permissions=["run"])
    def run_now(self, request, queryset):
        form = RunForm(request.POST if "queue" in request.POST else None)
        if form.is_valid():
            self._submit(request, list(queryset), form)
            return None
        return self._page(request, "Run now", form, items=[c.name for c in queryset],
                          action="run_now", selected=[c.pk for c in queryset],
                          submit="Run")

    def run_view(self, request, pk):
        config = self._config(request, pk, "jobs.add_job")
        form = RunForm(request.POST or None)
        if form.is_valid():
            self._submit(request, [config], form)
            return redirect(self._change_url(config))
        return self._page(request, f"Run {config.name} now", form, items=[config.name],
                          submit="Run")

    def _submit(self, request, configs, form):
        queue = form.cleaned_data["queue"]
        for config in configs:
            try:
                job = run_config(config, queue=queue, via=Job.Via.ADMIN, user=request.user,
                                 **form.metadata())
            except JobRefused as error:
                messages.error(request, f"{config.name}: not run: {error}")
                continue
            messages.success(request, format_html(
                '{}: <a href="{}">job {}</a> queued, {} cells on queue {}, {}', config.name,
                job.get_absolute_url(), job.pk, job.cells_total, queue, _measures(job)))

    def schedule_view(self, request, pk):
        config = self._config(request, pk, "django_celery_beat.add_periodictask")
        form = ScheduleForm(request.POST or None)
        if form.is_valid():
            queue = form.cleaned_data["queue"]
            try:
                task, created = schedules.schedule(
                    f"config {config.name} on {queue}", form.cleaned_data["cron"],
                    config=config.name, queue=queue,
                    **form.metadata())
            except ValueError as error:
                form.add_error("cron", str(error))
            else:
                commit = form.cleaned_data["head_sha"]
                messages.success(request, f"schedule {task.name!r} "
                                          f"{'created' if created else 'updated'}: "
                                          f"{task.crontab} UTC, measuring "
                                          f"{commit[:12] if commit else 'no commit (adhoc)'} "
                                          "(celery beat submits the job)")
                return redirect(self._change_url(config))
        return self._page(request, f"Schedule {config.name}", form, items=[config.name],
                          submit="Save schedule")

    def restore_view(self, request, pk, number):
        config = self._config(request, pk, "catalog.change_benchmarkconfig")
        version = get_object_or_404(ConfigVersion, config=config, number=number)
        if request.method == "POST":
            versions.restore(version, request.user)
            messages.success(request, f"{config.name}: version {number} restored")
            return redirect(self._change_url(config))
        diff = "".join(difflib.unified_diff(
            config.spec_yaml.splitlines(keepends=True), version.spec_yaml.splitlines(True),
            "current", f"version {number}"))
        return self._page(request, f"Restore {config.name} version {number}", None,
                          items=[f"saved {version.created_at:%Y-%m-%d %H:%M} by "
                                 f"{version.created_by or 'nobody'} ({version.note})"],
                          diff=diff or "(the spec is the same; description or timing differ)",
                          submit=f"Restore version {number}")

    def import_view(self, request):
        if not (request.user.has_perm("catalog.add_benchmarkconfig")
                and request.user.has_perm("catalog.change_benchmarkconfig")):
            raise PermissionDenied
        form = ImportForm(request.POST or None, request.FILES or None)
        if form.is_valid():
            upload = form.cleaned_data["file"]
            name = form.cleaned_data["name"] or config_name(upload.name)
            try:
                config, created = import_config(upload.read().decode(), name, request.user,
                                                source=upload.name)
            except UnicodeDecodeError:
                form.add_error("file", "not a UTF-8 text file")
            except SpecError as error:
                for problem in error.problems:
                    form.add_error("file", problem)
            else:
                messages.success(request, f"{config.name}: "
                                          f"{'created' if created else 'new version'} "
                                          f"from {upload.name}")
                return redirect(self._change_url(config))
        return self._page(request, "Import a benchmark config", form, multipart=True,
                          submit="Import")

    # Export: one config as its YAML file, several as a zip of them.

    def export_view(self, request, pk):
        config = self._config(request, pk, "catalog.view_benchmarkconfig")
        return _attachment(export_config(config), f"{config.name}.yml", "application/yaml")

    @admin.action(description="Export the selected configs as YAML")
    def export_yaml(self, request, queryset):
        configs = list(queryset)
        if len(configs) == 1:
            return self.export_view(request, configs[0].pk)
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w") as archive:
            for config in configs:
                archive.writestr(f"{config.name}.yml", export_config(config))
        return _attachment(buffer.getvalue(), "benchmark-configs.zip", "application/zip")


def _measures(job: Job) -> str:
    if job.adhoc:
        return f"no commit (what the workers have installed; branch {job.head_branch})"
    return f"{job.repo} {job.head_branch} at {job.head_sha[:12]}"


def _attachment(content, filename: str, content_type: str) -> HttpResponse:
    response = HttpResponse(content, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
