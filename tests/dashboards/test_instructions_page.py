"""The instruction counts page on demo data: counts at a base and a head commit, the change
coloured beyond the regression threshold for instruction counts (1%), sorting, the chart of
one benchmark over commits, CSV, and parameters that name themselves when wrong."""

import pytest
from django.core.management import call_command

from benchsite.regressions.models import DetectionSettings
from benchsite.results.demo import INSTRUCTIONS_STEP, XEON, sha

NIGHTS = 8  # the demo's step is on the third-last night: 5
ROWS = 16 * 4  # built-in definitions x (eager, TorchScript) x (forward, forward+backward)


@pytest.fixture
def demo(db):
    call_command("load_demo", "--nights", str(NIGHTS))


def get_json(client, query=""):
    response = client.get(f"/instructions/?format=json&{query}")
    assert response.status_code == 200, response.content[:500]
    return response.json()


def test_defaults_compare_the_largest_recent_change(client, demo,
                                                    django_assert_max_num_queries):
    with django_assert_max_num_queries(18):  # as many whatever the rows and commits
        page = get_json(client)
    filters = page["filters"]
    # the step is on the third-last night, not between the last two
    assert (filters["repo"], filters["head"], filters["base"]) == (
        "pytorch/pytorch", sha(NIGHTS - 3), sha(NIGHTS - 4))
    assert filters["arch"] == XEON.arch and filters["threshold"] == 1.0
    assert filters["benchmark"] == INSTRUCTIONS_STEP and len(page["figures"]) == 1
    [table] = page["tables"]
    assert table["columns"] == ["benchmark", "runtime", "autograd", "threads", "base", "head",
                                "change %", "head wall us", "status"]
    assert len(table["rows"]) == ROWS
    assert filters["changes"] == {"more": 1, "fewer": 0, "missing": 3}  # the 3 skipped cells
    assert 2.7 < table["rows"][0][6] < 3.3
    assert all(abs(row[6]) < 0.2 for row in table["rows"][1:] if row[6] is not None)
    html = client.get("/instructions/").content.decode()
    assert (f"The largest change among the last 10 commits: {INSTRUCTIONS_STEP}, +"
            in html)
    # a head chosen elsewhere is compared with the commit before it
    later = get_json(client, f"head={sha(NIGHTS - 1)}")["filters"]
    assert later["base"] == sha(NIGHTS - 2) and later["changes"]["more"] == 0
    skipped = [row for row in table["rows"] if row[-1]]
    assert {(row[0], row[-1]) for row in skipped} == {("empty", "skipped")}


def test_a_step_of_3_percent_is_coloured_and_sorted_first(client, demo):
    page = get_json(client, f"base={sha(0)}")
    first = page["tables"][0]["rows"][0]
    key = f"{first[0]} [{first[1]}, {first[2]}, 1 thread]"
    assert key == INSTRUCTIONS_STEP == page["filters"]["benchmark"]
    assert 2.7 < first[6] < 3.3
    assert page["filters"]["changes"]["more"] == 1
    html = client.get(f"/instructions/?base={sha(0)}").content.decode()
    assert html.count('class="worse"') == 1 and 'class="better"' not in html
    assert "1 with more than 1% more instructions" in html

    # its chart: one point per night, dotted lines at the base and the head commit
    [figure] = page["figures"]
    [trace] = figure["data"]
    assert len(trace["y"]) == NIGHTS and trace["y"][-1] / trace["y"][0] > 1.02
    assert len(figure["layout"]["shapes"]) == 2

    increase = get_json(client, f"base={sha(0)}&sort=decrease")["tables"][0]["rows"]
    changes = [row[6] for row in increase if row[6] is not None]
    assert changes == sorted(changes) and increase[-1][-1] == "skipped"
    names = [row[0] for row in get_json(client, "sort=name")["tables"][0]["rows"]]
    assert names == sorted(names)


def test_the_threshold_follows_the_regression_settings(client, demo):
    row = DetectionSettings.load().threshold_for("instruction_count", "instruction counts")
    assert (row.metric, row.tolerance) == ("*instruction*", 0.01)
    row.tolerance = 0.05
    row.save()
    page = get_json(client, f"base={sha(0)}")
    assert page["filters"]["threshold"] == 5.0 and page["filters"]["changes"]["more"] == 0
    assert get_json(client, f"base={sha(0)}&threshold=2")["filters"]["changes"]["more"] == 1


def test_choosing_a_benchmark_csv_and_bad_parameters(client, demo):
    chosen = "mlp [torchscript, forward_backward, 1 thread]"
    page = get_json(client, f"benchmark={chosen}")
    assert page["figures"][0]["data"][0]["name"] == chosen
    response = client.get("/instructions/?format=csv")
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    assert response.content.decode().splitlines()[0].startswith("benchmark,runtime,autograd")
    for query, problem in [("benchmark=nope", "benchmark: 'nope' is not one of"),
                           ("sort=random", "sort: 'random' is not one of"),
                           ("base=abc", "base: 'abc' is not one of")]:
        answer = client.get(f"/instructions/?format=json&{query}")
        assert answer.status_code == 400 and answer.json()["error"].startswith(problem)
        page = client.get(f"/instructions/?{query}")  # a person gets the page, with a note
        assert page.status_code == 200 and b'class="note"' in page.content


def test_an_empty_database_shows_an_empty_page(client, db):
    response = client.get("/instructions/")
    assert response.status_code == 200
    assert b'class="empty">No instruction counts for this repo, branch and device.' in (
        response.content)
    assert b'href="/instructions/">Instructions</a>' in response.content  # in the nav bar
