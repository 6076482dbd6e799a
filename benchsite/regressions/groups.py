"""An alert group read as one alert: what its members add up to (counts, benchmarks,
devices, recipes or backends, magnitudes), the links of its commit range, and triage applied
to every member.

Magnitudes are compared "in the better sense", from each member's kind and magnitude: an
improvement's size counts as positive, anything else's (a regression, a HUD "suspicious"
finding, a change whose better direction is unknown) as negative; an accuracy failure or a
missing metric is -1 (-100 %). A group's median is the median of its members' changes in
that sense, its worst the most negative one.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from benchsite.regressions.models import Detector, Regression
from runner.contract.names import QUANT_BENCHMARK

# How an accuracy failure and a missing metric read instead of a percentage.
CHANGE_TEXTS = {Detector.ACCURACY: "pass → fail", Detector.MISSING: "present → absent"}


def better_change(regression: Regression) -> float:
    """The member's relative change in the better sense: positive for an improvement,
    negative for anything else."""
    size = abs(regression.magnitude)
    return size if regression.kind == Regression.Kind.IMPROVEMENT else -size


def change_text(regression: Regression) -> str:
    """"+12.3 %", or "pass → fail" / "present → absent" for accuracy and missing metrics."""
    return CHANGE_TEXTS.get(regression.detector) or f"{regression.magnitude * 100:+.1f} %"


def variant(regression: Regression) -> str:
    """The recipe (the quantization benchmark's dtype) or the backend of a member's series."""
    series = regression.series
    return series.dtype if series.benchmark == QUANT_BENCHMARK else series.backend


@dataclass
class Summary:
    """What a group's members (or one ungrouped regression) add up to."""

    members: list[Regression]  # worst first
    regressions: int = 0
    improvements: int = 0
    others: int = 0  # suspicious findings and changes of unknown direction
    benchmarks: list[str] = field(default_factory=list)
    devices: list[str] = field(default_factory=list)  # arch, else device
    variants: list[str] = field(default_factory=list)  # recipes or backends
    median: float | None = None  # in the better sense (see the module's docstring)
    worst: float | None = None
    states: dict[str, int] = field(default_factory=dict)  # member count per state
    # member count per confirmation asked (its A/B try job's verdict, issue 32)
    confirmations: dict[str, int] = field(default_factory=dict)

    def listed(self, limit: int) -> list[Regression]:
        """The first `limit` members to spell out: the notified kinds first, each part worst
        first (the summary's order)."""
        return sorted(self.members,
                      key=lambda m: m.kind not in Regression.NOTIFIED_KINDS)[:limit]

    @property
    def is_open(self) -> bool:
        """A group is open while any member is current (open or acknowledged)."""
        return any(self.states.get(state) for state in Regression.CURRENT)

    @property
    def state(self) -> str:
        return "open" if self.is_open else "closed"

    @property
    def notified(self) -> int:
        """Members of the kinds that are notified (regressions, changes)."""
        return sum(1 for m in self.members if m.kind in Regression.NOTIFIED_KINDS)

    @property
    def worst_text(self) -> str:
        """The worst change as shown, in the better sense: "-12.3 %", or "pass → fail" where
        the worst member is an accuracy failure (a missing metric: "present → absent")."""
        if not self.members:
            return ""
        return (CHANGE_TEXTS.get(self.members[0].detector)
                or f"{better_change(self.members[0]) * 100:+.1f} %")

    @property
    def median_text(self) -> str:
        """The median as shown: a percentage of the members with a magnitude, followed by
        how many pass → fail (present → absent) members there are; only the latter where no
        member has a magnitude ("pass → fail" for one, "3 × pass → fail" for three)."""
        numeric = [better_change(m) for m in self.members
                   if m.detector not in CHANGE_TEXTS]
        texts = Counter(CHANGE_TEXTS[m.detector] for m in self.members
                        if m.detector in CHANGE_TEXTS)
        parts = [f"{statistics.median(numeric) * 100:+.1f} %"] if numeric else []
        parts += [text if count == 1 and not numeric else f"{count} × {text}"
                  for text, count in texts.items()]
        return ", ".join(parts)

    def states_text(self) -> str:
        """"3 open, 1 false positive"."""
        labels = dict(Regression.State.choices)
        return ", ".join(f"{count} {labels.get(state, state).lower()}"
                         for state, count in self.states.items())

    def confirmations_text(self) -> str:
        """"2 confirmed, 1 not reproduced" ("" when no confirmation was asked)."""
        labels = dict(Regression.Confirmation.choices)
        return ", ".join(f"{count} {labels.get(verdict, verdict)}"
                         for verdict, count in self.confirmations.items())

    def as_json(self) -> dict:
        return {"members": len(self.members), "regressions": self.regressions,
                "improvements": self.improvements, "others": self.others,
                "benchmarks": self.benchmarks, "devices": self.devices,
                "recipes_or_backends": self.variants, "median_magnitude": self.median,
                "worst_magnitude": self.worst, "states": self.states,
                "confirmations": self.confirmations}


def summarize(members: Iterable[Regression]) -> Summary:
    """The summary of these members (their `series` loaded)."""
    members = sorted(members, key=lambda m: (better_change(m), m.pk or 0))
    kinds = Counter(m.kind for m in members)
    changes = [better_change(m) for m in members]
    states = Counter(m.state for m in members)
    verdicts = Counter(m.confirmation for m in members if m.confirmation)
    return Summary(
        members=members, regressions=kinds[Regression.Kind.REGRESSION],
        improvements=kinds[Regression.Kind.IMPROVEMENT],
        others=len(members) - kinds[Regression.Kind.REGRESSION]
        - kinds[Regression.Kind.IMPROVEMENT],
        benchmarks=sorted({m.series.benchmark for m in members}),
        devices=sorted({m.series.arch or m.series.device for m in members} - {""}),
        variants=sorted({variant(m) for m in members} - {""}),
        median=statistics.median(changes) if changes else None,
        worst=min(changes) if changes else None,
        states={state: states[state] for state in Regression.State.values if states[state]},
        confirmations={verdict: verdicts[verdict] for verdict in Regression.Confirmation.values
                       if verdicts[verdict]})


def github_compare_url(repo: str, last_good_sha: str, first_bad_sha: str) -> str:
    """The commits of a range on GitHub; "" when the last good commit is unknown."""
    if not last_good_sha or not first_bad_sha or last_good_sha == first_bad_sha:
        return ""
    return f"https://github.com/{repo}/compare/{last_good_sha}...{first_bad_sha}"


def triage_members(members: Iterable[Regression], state: str, user=None,
                   note: str = "") -> int:
    """Triage each member (each gets its own event); returns how many changed."""
    return sum(member.triage(state, user, note) for member in members)
