"""Commit comparisons (`benchsite.comparison.compare`) judged with this site's detection
settings (`DetectionSettings`: thresholds, default branches, history, the false discovery
rate) and the changes detection recorded (`changes.recorded_changes`): what the compare
API, the compare page and the tests call."""

from __future__ import annotations

from benchsite.comparison import compare
from benchsite.comparison.compare import Comparison
from benchsite.comparison.judge import Rules
from benchsite.regressions.changes import recorded_changes
from benchsite.regressions.models import DetectionSettings


def compare_commits(repo: str, base_sha: str, head_sha: str, *,
                    settings: DetectionSettings | None = None, fdr: float | None = None,
                    **filters: str) -> Comparison:
    """`compare.compare_commits` with these settings (default: the site's); the false
    discovery rate `fdr`, else the settings' `compare_fdr`."""
    return compare.compare_commits(repo, base_sha, head_sha,
                                   settings=settings or DetectionSettings.load(),
                                   changes=recorded_changes, fdr=fdr, **filters)


def recent_comparison(repo: str, base_sha: str, head_sha: str, *, fdr: float | None = None,
                      **filters: str) -> Comparison:
    """`compare.recent_comparison` with the site's settings; the false discovery rate
    `fdr`, else the setting's (read alone: the whole settings are loaded only when the
    comparison is not kept)."""
    if fdr is None:
        fdr = (DetectionSettings.objects.filter(pk=1).values_list("compare_fdr", flat=True)
               .first() or Rules.fdr)
    return compare.recent_comparison(repo, base_sha, head_sha, fdr=fdr,
                                     settings=DetectionSettings.load,
                                     changes=recorded_changes, **filters)
