"""Regressions found in result series, their triage history, and what detection and alerts
are configured with (edited in the admin): one module per model or family of models, all
importable from here. The admin's metric directions and the stored series baselines are
the comparison app's (`benchsite.comparison.models`)."""

from benchsite.regressions.models.alerts import NotificationTarget, SilenceAlert
from benchsite.regressions.models.regressions import (
    AlertGroup,
    Detector,
    Regression,
    RegressionEvent,
)
from benchsite.regressions.models.reports import NightlyReport
from benchsite.regressions.models.settings import (
    DEFAULT_CHANGEPOINT_MAGNITUDES,
    DEFAULT_THRESHOLDS,
    ConfirmMode,
    DetectionSettings,
    MetricThreshold,
    RepoBranches,
    split_branches,
)

__all__ = ["DEFAULT_CHANGEPOINT_MAGNITUDES", "DEFAULT_THRESHOLDS", "AlertGroup",
           "ConfirmMode", "DetectionSettings", "Detector", "MetricThreshold", "NightlyReport",
           "NotificationTarget", "Regression", "RegressionEvent", "RepoBranches",
           "SilenceAlert", "split_branches"]
