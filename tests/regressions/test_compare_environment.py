"""The environment diff of a commit comparison (`comparison.environments`): per device, and
per job where they differ, what changed between the base's and the head's runs, as
`GET /api/v3/compare` answers it."""

import pytest

from benchsite.regressions.comparisons import compare_commits, recent_comparison
from benchsite.results.models import Run
from tests.regressions.factory import H100, record, sha, upload, with_torch

pytestmark = pytest.mark.django_db
A100 = "NVIDIA A100-SXM4-80GB"


def measured(torch: str | None, arch: str = H100, job: str = "nightly",
             model: str = "int8dq-1024") -> dict:
    """A record of a job's run with torch `torch` on a GPU `arch`; with no torch (None),
    one whose run has no fingerprint."""
    found = {**record(model, [1.0, 1.01, 0.99], arch=arch), "name": job}
    return found if torch is None else with_torch(found, torch, job)


def environment(api, base: int, head: int, **filters: str) -> list[dict]:
    answer = api.get("/api/v3/compare", {"repo": "pytorch/ao", "base": sha(base),
                                         "head": sha(head), **filters})
    assert answer.status_code == 200, answer.content
    return answer.json()["environment"]


def hash_of(night: int, arch: str = H100, job: str = "nightly") -> str:
    return Run.objects.get(head_sha=sha(night), arch=arch, name=job).environment_hash


def test_the_same_environment_is_said_once_per_device(api):
    upload(1, [measured("2.5.0")])
    upload(2, [measured("2.5.0")])
    assert environment(api, 1, 2) == [{
        "device": "cuda", "arch": H100, "job": "", "base_hash": hash_of(1),
        "head_hash": hash_of(1), "same": True, "state": "same", "changes": [],
        "summary": "same environment"}]


def test_a_torch_bump_is_listed_with_what_stayed(api):
    upload(1, [measured("2.5.0")])
    upload(2, [measured("2.6.0.dev20251120")])
    [entry] = environment(api, 1, 2)
    assert entry == {
        "device": "cuda", "arch": H100, "job": "nightly", "base_hash": hash_of(1),
        "head_hash": hash_of(2), "same": False, "state": "changed",
        "changes": [{"key": "torch", "before": "2.5.0", "after": "2.6.0.dev20251120"}],
        "summary": "torch 2.5.0 -> 2.6.0.dev20251120; cuda, gpu unchanged"}
    assert entry["base_hash"] and entry["base_hash"] != entry["head_hash"]


def test_a_device_at_one_commit_only_and_an_unknown_environment_are_said(api):
    upload(1, [measured("2.5.0"), measured(None, arch=A100)])
    upload(2, [measured("2.5.0", model="other"), measured("2.5.0", arch=A100),
               measured("2.5.0", arch="NVIDIA B200")])
    by_arch = {entry["arch"]: entry for entry in environment(api, 1, 2)}
    assert list(by_arch) == [A100, "NVIDIA B200", H100]  # sorted by device, then arch
    assert by_arch["NVIDIA B200"] | {"head_hash": "h"} == {
        "device": "cuda", "arch": "NVIDIA B200", "job": "", "base_hash": "", "head_hash": "h",
        "same": False, "state": "head_only", "changes": [], "summary": "no runs at the base"}
    unknown = by_arch[A100]
    assert (unknown["state"], unknown["same"], unknown["summary"], unknown["base_hash"]) == (
        "unknown", False, "environment unknown at the base", "")
    assert by_arch[H100]["same"] is True
    # The comparison's device filters narrow it.
    assert [entry["arch"] for entry in environment(api, 1, 2, arch=H100)] == [H100]
    upload(3, [measured("2.5.0")])
    assert environment(api, 3, 2, arch=A100)[0]["state"] == "head_only"
    assert environment(api, 2, 3, arch=A100)[0]["summary"] == "no runs at the head"


def test_jobs_are_compared_with_their_own_job():
    # Two jobs on one machine install different packages; only one of them moves.
    upload(1, [measured("2.5.0", job="micro"), measured("2.4.1", job="llama", model="llama")])
    upload(2, [measured("2.5.0", job="micro"), measured("2.5.0", job="llama", model="llama")])
    [entry] = compare_commits("pytorch/ao", sha(1), sha(2)).environment
    assert (entry.job, entry.summary) == ("llama", "torch 2.4.1 -> 2.5.0; cuda, gpu unchanged")
    # Jobs renamed in between: the newest run of each side is compared.
    upload(3, [measured("2.5.0", job="micro-v2")])
    [renamed] = compare_commits("pytorch/ao", sha(1), sha(3)).environment
    assert (renamed.job, renamed.same) == ("llama -> micro-v2", False)


def test_the_kept_comparison_carries_its_environment():
    upload(1, [measured("2.5.0")])
    upload(2, [measured("2.6.0")])
    kept = recent_comparison("pytorch/ao", sha(1), sha(2))
    assert recent_comparison("pytorch/ao", sha(1)[:8], sha(2)) is kept
    assert [str(change) for change in kept.environment[0].changes] == [
        "torch 2.5.0 -> 2.6.0"]


def test_the_page_shows_what_differs_above_the_table_or_says_it_is_the_same(client):
    upload(1, [measured("2.5.0"), measured("2.5.0", arch=A100)])
    upload(2, [measured("2.5.0"), measured("2.5.0", arch=A100)])
    upload(3, [measured("2.6.0<b>"), measured("2.5.0", arch=A100)])

    def page(base: int, head: int, query: str = "") -> str:
        url = f"/compare/{sha(base)}...{sha(head)}?repo=pytorch/ao{query}"
        return client.get(url).content.decode()

    same = page(1, 2)
    assert "Same environment on every device both commits ran on." in same
    assert '<table data-table="environment">' not in same
    changed = page(1, 3)
    assert "Same environment" not in changed
    section = changed.split('<table data-table="environment">', 1)[1].split("</table>")[0]
    assert (f"<td>{H100}</td><td>nightly</td><td>torch 2.5.0 -&gt; 2.6.0&lt;b&gt;; cuda, "
            "gpu unchanged</td>") in section
    assert A100 not in section  # the same on the A100: not listed
    assert changed.index('<table data-table="environment">') < changed.index(
        '<table data-table="summary">')
    # The device filter narrows it.
    assert "Same environment on every device" in page(1, 3, f"&arch={A100}")
