"""Pages sized for people: the compare page lists changes first, a page at a time; the run
page pages and filters its results; `?page=all` shows every row, a CSV holds every row, and
a page that does not exist is the first page with a note (an error for JSON)."""

import csv
import html as markup
import io

import pytest
from django.core.management import call_command

from benchsite.comparison.judge import STATES
from benchsite.results.demo import sha
from benchsite.results.models import Result, Run
from dashboards.paging import PER_PAGE

H100 = "NVIDIA H100 80GB HBM3"
COMPARE = f"/compare/{sha(5)}...{sha(7)}?repo=pytorch/ao"


@pytest.fixture
def demo(db):
    call_command("load_demo", "--nights", "8")


def get_json(client, url):
    response = client.get(url + ("&" if "?" in url else "?") + "format=json")
    assert response.status_code == 200, response.content[:500]
    return response.json()


def test_compare_lists_changes_first_a_page_at_a_time(client, demo):
    page = get_json(client, COMPARE)
    total = sum(page["filters"]["counts"].values())
    assert total > 2 * PER_PAGE
    series = page["tables"][1]
    assert series["paging"] == {"page": 1, "pages": -(-total // PER_PAGE), "rows": total}
    assert page["filters"]["page"] == 1 and len(series["rows"]) == PER_PAGE

    every = get_json(client, COMPARE + "&page=all")["tables"][1]["rows"]
    assert len(every) == total and every[:PER_PAGE] == series["rows"]
    state, change = (series["columns"].index(name) for name in ("state", "change %"))
    ranks = [STATES.index(row[state].replace(" ", "_")) for row in every]
    assert ranks == sorted(ranks)  # regressions, improvements, ..., unchanged last
    assert every[0][state] != "unchanged" and every[-1][state] == "unchanged"
    for shown in {row[state] for row in every}:
        changes = [abs(row[change] or 0) for row in every if row[state] == shown]
        assert changes == sorted(changes, reverse=True), shown  # the largest first
    second = get_json(client, COMPARE + "&page=2")["tables"][1]["rows"]
    assert second == every[PER_PAGE:2 * PER_PAGE]

    response = client.get(COMPARE + "&format=csv&table=series")
    rows = list(csv.reader(io.StringIO(response.content.decode())))
    assert len(rows) == 1 + total  # a download holds every row

    html = client.get(COMPARE).content.decode()
    assert f"Rows 1–{PER_PAGE} of {total} (page 1 of" in html
    assert 'rel="next">next</a>' in html and 'rel="all">show all</a>' in html
    assert html.count("<tr>") < PER_PAGE + 40  # the page, the summary and the headers


def test_a_filter_keeps_its_rows_and_starts_at_the_first_page(client, demo):
    page = get_json(client, COMPARE + f"&arch={H100}&metric=Fwd Speedup (x)")
    rows = page["tables"][1]["rows"]
    assert rows and {row[1] for row in rows} == {H100}
    assert {row[2] for row in rows} == {"Fwd Speedup (x)"}
    assert page["filters"]["page"] == 1


def test_a_page_that_does_not_exist_is_the_first_with_a_note(client, demo):
    for bad, problem in (("99", "99 is past the last page"),
                         ("x", "'x' is not a page number or 'all'")):
        response = client.get(COMPARE + f"&page={bad}")
        assert response.status_code == 200
        assert markup.escape(f"page: {problem}") in response.content.decode()
        assert "Rows 1–50" in response.content.decode()
        response = client.get(COMPARE + f"&page={bad}&format=json")
        assert response.status_code == 400 and response.json()["error"].startswith(
            f"page: {problem}")


def test_the_run_page_pages_and_filters_its_results(client, demo):
    run = Run.objects.get(repo="pytorch/ao", head_sha=sha(7), arch=H100)
    page = get_json(client, f"/runs/{run.pk}/")
    assert page["filters"] == {"run": run.pk, "benchmark": "", "metric": "", "model": "",
                               "page": 1, "pages": -(-run.result_count // PER_PAGE),
                               "rows": run.result_count}
    assert len(page["tables"][0]["rows"]) == PER_PAGE
    assert page["tables"][0]["columns"][:5] == ["benchmark", "model", "metric", "value",
                                                "spread"]
    metrics = [row[2] for row in page["tables"][0]["rows"]]
    assert metrics[0] == "Fwd Speedup (x)"  # the benchmark's headline metric first

    only = get_json(client, f"/runs/{run.pk}/?metric=Fwd Speedup (x)&model=int8wo&page=all")
    rows = only["tables"][0]["rows"]
    assert rows and {row[2] for row in rows} == {"Fwd Speedup (x)"}
    assert all(row[4].startswith("95% CI ") for row in rows)  # the spread beside the value
    assert all("int8wo" in row[1] for row in rows) and only["filters"]["page"] == "all"
    assert len(rows) == Result.objects.filter(run=run, series__metric="Fwd Speedup (x)",
                                              series__model__icontains="int8wo").count()

    html = client.get(f"/runs/{run.pk}/?metric=nope").content.decode()
    assert "metric: &#x27;nope&#x27; is not offered here; showing all." in html
    assert '<select name="metric">' in html and 'name="model"' in html
    assert client.get(f"/runs/{run.pk}/?metric=nope&format=json").status_code == 400
