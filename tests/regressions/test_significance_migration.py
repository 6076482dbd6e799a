"""Settings still at the change point's old significance level move to the new default
(chosen with the longer noise window); a level an admin chose is kept."""

import pytest

from benchsite.regressions.detect import changepoint
from tests.migrating import migrate, migrate_to_latest

BEFORE = [("regressions", "0008_compare_fdr")]
AFTER = [("regressions", "0009_changepoint_significance")]


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize(("stored", "expected"), [(1e-5, changepoint.DEFAULT.alpha),
                                                  (1e-4, 1e-4)])
def test_the_old_default_level_moves_and_a_chosen_one_stays(stored, expected):
    try:
        old = migrate(BEFORE).get_model("regressions", "DetectionSettings")
        old.objects.update_or_create(pk=1, defaults={"significance": stored})
        row = migrate(AFTER).get_model("regressions", "DetectionSettings").objects.get(pk=1)
        assert row.significance == expected
        back = migrate(BEFORE).get_model("regressions", "DetectionSettings").objects.get(pk=1)
        assert back.significance == stored
    finally:
        migrate_to_latest()
