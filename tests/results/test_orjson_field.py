"""Result.extra_info is read by orjson, and what orjson cannot read comes back as the json
module reads it."""

from benchsite.results.fields import OrjsonField
from benchsite.results.models import Result


def test_extra_info_reads_as_the_json_module_would():
    field = Result._meta.get_field("extra_info")
    assert isinstance(field, OrjsonField)
    text = '{"ci_low": 0.98, "builds": [{"speedup": 1.0}], "unstable": false, "n": null}'
    assert field.from_db_value(text, None, None) == {
        "ci_low": 0.98, "builds": [{"speedup": 1.0}], "unstable": False, "n": None}
    assert field.from_db_value(None, None, None) is None


def test_what_orjson_refuses_falls_back_to_the_json_module():
    field = OrjsonField()
    nan = field.from_db_value('{"ci_low": NaN}', None, None)  # SQLite keeps json.dumps' NaN
    assert nan["ci_low"] != nan["ci_low"]
    # orjson reads an integer past 64 bits as a float (the stored text, and the upload's raw
    # payload, keep every digit)
    assert field.from_db_value('{"big": 123456789012345678901234567890}', None, None) == {
        "big": 1.2345678901234568e29}
    assert field.from_db_value("not json", None, None) == "not json"  # as Django leaves it
