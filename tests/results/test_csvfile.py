"""The site's one CSV writer (benchsite.csvfile): the formula guard, numbers kept numbers, and
downloads that either complete or fail before their first byte."""

import csv
import io
import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from benchsite import csvfile
from benchsite.results.ingest import store_upload
from tests.results.samples import META, record


def parsed(response) -> list[list[str]]:
    content = (b"".join(response.streaming_content) if response.streaming
               else response.content)
    return list(csv.reader(io.StringIO(content.decode())))


@pytest.mark.parametrize("text", ["=1+1", "+1", "-1", "@SUM(A1)", "\tx", "\rx",
                                  '=HYPERLINK("https://evil.example","click")'])
def test_text_a_spreadsheet_would_run_is_written_as_text(text):
    response = csvfile.response("t.csv", ["name"], [[text]])
    assert parsed(response) == [["name"], ["'" + text]]


def test_numbers_stay_numbers_and_missing_is_empty():
    response = csvfile.response("t.csv", ["a", "b", "c", "d"], [[-3.2, -7, None, "plain"]])
    assert parsed(response)[1] == ["-3.2", "-7", "", "plain"]
    assert response.content.decode().splitlines()[1] == "-3.2,-7,,plain"


def test_lists_and_objects_are_json_and_guarded():
    row = [["=x"], {"k": 1}, {"big": 2**70}]
    assert parsed(csvfile.response("t.csv", ["a", "b", "c"], [row]))[1] == [
        '["=x"]', '{"k":1}', json.dumps({"big": 2**70})]
    assert csvfile.cell({"=": 1}) == '{"=":1}'
    assert csvfile.cell("=x") == "'=x"


def test_column_names_are_guarded_too():
    assert parsed(csvfile.response("t.csv", ["=a"], []))[0] == ["'=a"]


def test_a_stream_whose_source_fails_fails_before_its_first_byte():
    def rows():
        raise RuntimeError("the query failed")
        yield [1]

    with pytest.raises(RuntimeError, match="the query failed"):
        csvfile.response("t.csv", ["a"], rows(), stream=True)


def test_a_stream_still_has_every_row():
    response = csvfile.response("t.csv", ["a"], iter([[1], [2], [3]]), stream=True)
    assert response["Content-Disposition"] == 'attachment; filename="t.csv"'
    assert parsed(response) == [["a"], ["1"], ["2"], ["3"]]
    assert parsed(csvfile.response("t.csv", ["a"], iter([]), stream=True)) == [["a"]]


def test_the_results_download_runs_its_query_before_answering(api):
    store_upload(json.dumps([record(**META, model={"name": "-negative"}),
                             record(**{**META, "head_sha": "c" * 40})]).encode())
    with CaptureQueriesContext(connection) as queries:
        response = api.get("/api/v3/results?format=csv&repo=pytorch/ao")
    assert response.status_code == 200 and response.streaming
    assert any("results_result" in query["sql"] for query in queries.captured_queries)
    rows = parsed(response)
    assert len(rows) == 3
    assert {row[rows[0].index("model")] for row in rows[1:]} == {
        "'-negative", "int8wo-1024-1024-1024"}
    assert {row[rows[0].index("value")] for row in rows[1:]} == {"1.25"}
