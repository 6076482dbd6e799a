"""Form fields for access settings, so the admin edits lists as text, not JSON."""

from __future__ import annotations

from django import forms

from benchsite.access.models import RepoScope


class RepoPatternsField(forms.CharField):
    """Repos as 'owner/name' or 'owner/*', one a line (or comma-separated), as a list."""

    widget = forms.Textarea(attrs={"rows": 3})

    def prepare_value(self, value):
        return "\n".join(value) if isinstance(value, list) else value

    def to_python(self, value) -> list[str]:
        items = [item.strip() for line in (value or "").splitlines()
                 for item in line.split(",") if item.strip()]
        bad = [item for item in items if item.count("/") != 1]
        if bad:
            raise forms.ValidationError(
                [f"{item!r}: expected OWNER/NAME or a pattern such as OWNER/*" for item in bad])
        return items

    def validate(self, value):
        if self.required and not value:
            raise forms.ValidationError(self.error_messages["required"], code="required")


class RepoScopeForm(forms.ModelForm):
    repos = RepoPatternsField(required=False)

    class Meta:
        model = RepoScope
        fields = ["user", "repos"]
