"""Admin forms: each problem the runner finds is shown next to the field it comes from."""

from __future__ import annotations

from django import forms
from django.conf import settings

from benchsite.catalog.configs import ConfigCheck, check_config, check_timing
from benchsite.catalog.models import BenchmarkConfig, Recipe
from benchsite.catalog.schedules import NIGHTLY
from benchsite.catalog.validation import RecipeCheck, check_recipe
from benchsite.jobs.models import ADHOC_BRANCH
from benchsite.jobs.submit import CommitRefused, job_commit
from runner.engine.specs import SpecError

DEVICE_CHOICES = [("cpu", "cpu"), ("cuda", "cuda")]
RECIPE_FIELDS = ["name", "enabled", "description", "config", "kwargs", "sparsify", "devices",
                 "min_capability", "packages"]


class ListField(forms.CharField):
    """A list of names typed comma-separated."""

    def prepare_value(self, value):
        return ", ".join(value) if isinstance(value, list) else value

    def to_python(self, value):
        return [item.strip() for item in (value or "").split(",") if item.strip()]


class RecipeForm(forms.ModelForm):
    devices = forms.MultipleChoiceField(
        choices=DEVICE_CHOICES, required=False, widget=forms.CheckboxSelectMultiple,
        help_text=Recipe._meta.get_field("devices").help_text)
    packages = ListField(required=False, help_text="custom recipes: modules a worker must "
                                                   "have, comma-separated (e.g. triton)")

    class Meta:
        model = Recipe
        fields = RECIPE_FIELDS
        widgets = {"kwargs": forms.Textarea(attrs={"rows": 4, "class": "vLargeTextField"})}

    check: RecipeCheck | None = None

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned  # a field's own problem first (e.g. kwargs that are not JSON)
        values = {**{key: getattr(self.instance, key) for key in RECIPE_FIELDS}, **cleaned}
        self.check = check_recipe(values)
        for field, messages in self.check.errors.items():
            for message in messages:
                self.add_error(field if field in self.fields else None, message)
        if not self.check.errors:
            self.instance.kind = self.check.kind
            self.instance.checked_with = self.check.checked_with
        return cleaned


class ConfigForm(forms.ModelForm):
    spec_yaml = forms.CharField(
        label="Spec (YAML)", strip=False, help_text=BenchmarkConfig._meta.get_field(
            "spec_yaml").help_text,
        widget=forms.Textarea(attrs={"rows": 24, "cols": 100, "spellcheck": "false",
                                     "style": "font-family: monospace"}))

    class Meta:
        model = BenchmarkConfig
        fields = ["name", "description", "spec_yaml", "timing"]
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}

    check: ConfigCheck | None = None

    def clean_spec_yaml(self):
        # Browsers send a textarea's lines with CRLF; the YAML is kept as written otherwise.
        return self.cleaned_data["spec_yaml"].replace("\r\n", "\n")

    def clean(self):
        cleaned = super().clean()
        text = cleaned.get("spec_yaml")
        if text is None:
            return cleaned
        name = cleaned.get("name") or self.instance.name or "config"
        try:
            self.check = check_config(text, name)
        except SpecError as error:
            for problem in error.problems:
                self.add_error("spec_yaml", problem)
            return cleaned
        if "timing" in cleaned:
            try:
                check_timing(self.check.family, cleaned["timing"] or {})
            except ValueError as error:
                self.add_error("timing", str(error))
        return cleaned


class RunForm(forms.Form):
    """Where a job runs and what it measures: a commit, or nothing (an adhoc run)."""

    queue = forms.ChoiceField(help_text="the workers that run the job (setting BENCH_QUEUES)")
    repo = forms.CharField(required=False, help_text="OWNER/NAME of the code measured "
                                                     "(empty: setting BENCH_JOB_REPO)")
    head_sha = forms.CharField(
        label="Commit", required=False,
        help_text="the full sha the workers measure. Empty: they run what they have "
                  f"installed, and the results go on the {ADHOC_BRANCH!r} branch, never on "
                  "the default branch's history")
    head_branch = forms.CharField(label="Branch", required=False,
                                  help_text="the commit's branch; default main")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["queue"].choices = [(queue, queue) for queue in settings.BENCH_QUEUES]
        self.fields["repo"].initial = settings.BENCH_JOB_REPO

    def clean(self):
        cleaned = super().clean()
        if self.errors:
            return cleaned
        try:
            cleaned["repo"], cleaned["head_branch"], cleaned["head_sha"] = job_commit(
                cleaned["repo"], cleaned["head_branch"], cleaned["head_sha"])
        except CommitRefused as error:
            self.add_error(error.field, error.message)
        return cleaned

    def metadata(self) -> dict[str, str]:
        """The job's run metadata, as submit_plan takes it: the repo, and the commit if any."""
        fields = ("repo", "head_branch", "head_sha") if self.cleaned_data["head_sha"] else (
            "repo",)
        return {key: self.cleaned_data[key] for key in fields}


class ScheduleForm(RunForm):
    cron = forms.CharField(initial=NIGHTLY, help_text="minute hour day-of-month month "
                                                      "day-of-week, in UTC; default nightly")

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["head_sha"].help_text = (
            "the full sha measured at every run of the schedule (e.g. a release to watch). A "
            "branch's newest commit cannot be followed yet: nothing here resolves a branch to "
            "its head. Empty: each run measures what the workers have installed, recorded on "
            f"the {ADHOC_BRANCH!r} branch (never the default branch's history)")


class ImportForm(forms.Form):
    file = forms.FileField(help_text="a YAML spec, e.g. one of torchao's config files")
    name = forms.CharField(required=False, help_text="default: the file name without .yml; "
                                                     "an existing config gets a new version")
