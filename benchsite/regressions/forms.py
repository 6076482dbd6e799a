from __future__ import annotations

from django import forms
from django.db.models import Q, QuerySet

from benchsite.regressions.models import Detector, Regression

CURRENT, ANY = "current", "any"


class FilterForm(forms.Form):
    """The regressions page's filters; all of them live in the URL's query string."""

    state = forms.ChoiceField(
        required=False,
        choices=[(CURRENT, "current (open or acknowledged)"), (ANY, "any"),
                 *Regression.State.choices])
    kind = forms.ChoiceField(required=False, choices=[("", "any"), *Regression.Kind.choices])
    detector = forms.ChoiceField(required=False, choices=[("", "any"), *Detector.choices])
    repo = forms.CharField(required=False)
    benchmark = forms.CharField(required=False)
    device = forms.CharField(required=False, help_text="device or arch, e.g. 'H100'")

    def regressions(self) -> QuerySet[Regression]:
        """The matching regressions, newest change first (an invalid form matches none)."""
        found = Regression.objects.select_related("series")
        if not self.is_valid():
            return found.none()
        data = self.cleaned_data
        state = data["state"] or CURRENT
        if state == CURRENT:
            found = found.filter(state__in=Regression.CURRENT)
        elif state != ANY:
            found = found.filter(state=state)
        for name in ("kind", "detector"):
            if data[name]:
                found = found.filter(**{name: data[name]})
        if data["repo"]:
            found = found.filter(series__repo=data["repo"])
        if data["benchmark"]:
            found = found.filter(series__benchmark=data["benchmark"])
        if data["device"]:
            found = found.filter(Q(series__device__icontains=data["device"])
                                 | Q(series__arch__icontains=data["device"]))
        return found.order_by("-first_bad_at", "-id")


class TriageForm(forms.Form):
    state = forms.ChoiceField(choices=Regression.State.choices)
    note = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}),
                           max_length=2000)
