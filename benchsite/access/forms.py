"""Form fields for access settings, so the admin edits lists as text, not JSON."""

from __future__ import annotations

from django import forms

from benchsite.access.models import RepoScope
from runner.contract.repos import pattern_problem


class RepoPatternsField(forms.CharField):
    """Repo patterns (OWNER/NAME, OWNER/* or *), one a line (or comma-separated), as a
    list."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value) -> list[str]:
        items = [item.strip() for line in (value or "").splitlines()
                 for item in line.split(",") if item.strip()]
        problems = [f"{problem} (plain text, one a line or comma-separated)"
                    for item in items if (problem := pattern_problem(item))]
        if problems:
            raise forms.ValidationError(problems)
        return items

    def validate(self, value):
        if self.required and not value:
            raise forms.ValidationError(self.error_messages["required"], code="required")


class RepoScopeForm(forms.ModelForm):
    repos = RepoPatternsField(required=False, label="Repos whose raw uploads they see")
    upload_repos = RepoPatternsField(
        required=False, label="Repos they may mint upload tokens for",
        help_text="OWNER/NAME, OWNER/* or *, one a line: each repo of a token they mint must be "
                  "covered by one of these (superusers mint any)")

    class Meta:
        model = RepoScope
        fields = ["user", "repos", "upload_repos"]
