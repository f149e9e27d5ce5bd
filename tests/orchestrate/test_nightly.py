"""The nightly benchmark: first night said so, later nights compared with the last good one, pruned."""

from __future__ import annotations

import polars as pl
import pytest

from assay.cli import EXIT_GATE, main
from assay.orchestrate.nightly import nightly_markdown, verdict
from assay.store import Store
from tests.conftest import openai_spec
from tests.helpers.cli import assay_json


@pytest.mark.slow
def test_nights_compare_with_the_last_good_one_and_old_ones_are_pruned(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=30, fail_on_item_error_rate=1)
    store = tmp_path / "s"

    first = assay_json(capsys, "nightly", spec, "--store", store, "--retention", "2")
    (night,) = first["specs"]
    assert night["baseline"] is None and "first night" in night["note"]
    assert "nightly" in Store(store).read_run(night["run_id"])["tags"]

    second = assay_json(capsys, "nightly", spec, "--store", store, "--retention", "2")
    (night2,) = second["specs"]
    assert night2["baseline"] == night["run_id"]
    assert {row["verdict"] for row in night2["comparison"]["scorers"]} == {"unchanged"}

    # Tonight the model answers worse: the comparison regresses and the nightly fails.
    mock.configure(answers={f"What is {i} + {i}?": "no idea" for i in range(30)})
    third = assay_json(capsys, "nightly", spec, "--store", store, "--retention", "2", code=EXIT_GATE)
    (night3,) = third["specs"]
    assert third["passed"] is False
    assert night3["baseline"] == night2["run_id"]
    assert any("regressed" in failure for failure in third["failures"])
    # Retention 2: the first night is gone from every dataset, never half.
    assert night3["removed"] == [night["run_id"]]
    for dataset in ("runs", "items", "scores"):
        assert not (store / dataset / f"run_id={night['run_id']}").exists()
    assert set(Store(store).runs().collect()["run_id"]) == {night2["run_id"], night3["run_id"]}

    # A failed night is no baseline: the next night compares with night 2, the last good one.
    mock.reset()
    fourth = assay_json(capsys, "nightly", spec, "--store", store, "--retention", "5")
    assert fourth["specs"][0]["baseline"] == night2["run_id"]
    scores = Store(store).scores().filter(pl.col("run_id") == night["run_id"]).collect()
    assert scores.height == 0


def test_a_failed_night_leads_with_its_regression_then_its_gates(tmp_path, mock, capsys):
    """The night's failures, and its markdown for the nightly's flow run: the regression first,
    then the run's failed gate; the first night says it has no baseline yet."""
    spec = openai_spec(tmp_path, mock.base_url, n=30)
    store = tmp_path / "s"
    first = assay_json(capsys, "nightly", spec, "--store", store)
    assert verdict(first["specs"][0]) == "no baseline yet: this night becomes it"
    assert "no baseline yet" in nightly_markdown(first, "nightly-2026-12-02", {})

    # Tonight most answers are wrong and two items fail (6.7 %, over the run's 5 % gate).
    mock.configure(
        answers={"*": "no idea"},
        faults=[{"status": 400, "times": -1, "match": f"What is {i} + {i}?"} for i in (3, 5)],
    )
    night = assay_json(capsys, "nightly", spec, "--store", store, code=EXIT_GATE)
    (report,) = night["specs"]
    run_id = report["run_id"]
    assert report["status"] == "failed_gate"
    *regressed, gate = night["failures"]
    assert [line.split(": ")[-1].split()[0] for line in regressed] == ["digits"], regressed
    assert all(line.startswith(f"arith {run_id}: ") and line.endswith(" regressed") for line in regressed)
    assert gate.startswith(f"arith {run_id}: item error rate 6.7% (2 failed of 30 attempted)"), gate
    assert gate.endswith("(fail_on_item_error_rate)"), gate
    assert verdict(report).startswith("FAILED: ") and verdict(report).index("regressed") < verdict(
        report
    ).index("item error rate")

    page = nightly_markdown(night, "nightly-2026-12-03", {run_id: str(tmp_path / "r.html")})
    assert page.startswith(
        "# nightly-2026-12-03: FAILED\n\nWhy it failed (regressions first, then gates):\n\n"
    )
    assert page.index(regressed[-1]) < page.index(gate)
    assert f"[report]({(tmp_path / 'r.html').as_uri()})" in page
    assert f"| `{first['specs'][0]['run_id']}` |" in page, "the baseline named"
    assert "assay view" not in page and "/compare?" not in page  # no ASSAY_VIEW_URL: no view links


def test_the_nightly_markdown_links_each_run_and_comparison_to_the_view(tmp_path, mock, capsys, monkeypatch):
    """With ASSAY_VIEW_URL set, each spec's row links to its run's page and, once it has a
    baseline, to the compare page of the baseline against it; both open in the view."""
    from urllib.parse import urlsplit

    from tests.view.conftest import client

    view = "http://127.0.0.1:8484"
    spec = openai_spec(tmp_path, mock.base_url, n=6, fail_on_item_error_rate=1)
    store = tmp_path / "s"
    assay_json(capsys, "nightly", spec, "--store", store)
    night = assay_json(capsys, "nightly", spec, "--store", store)
    (report,) = night["specs"]
    monkeypatch.setenv("ASSAY_VIEW_URL", view + "/")
    page = nightly_markdown(night, "nightly-2026-12-03", {})
    run_link = f"{view}/runs/{report['run_id']}"
    compare_link = f"{view}/compare?a={report['baseline']}&b={report['run_id']}"
    assert f"[run]({run_link}) · [compare]({compare_link})" in page
    with client(store) as http:
        for link in (run_link, compare_link):
            parts = urlsplit(link)
            assert http.get(parts.path + (f"?{parts.query}" if parts.query else "")).status_code == 200, link


def test_the_nightly_names_each_run_with_its_model_and_tags(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=4, fail_on_item_error_rate=1)
    store = tmp_path / "s"
    first = assay_json(capsys, "nightly", spec, "--store", store)
    night = first["specs"][0]["run_id"]
    assert first["runs"][night] == {
        "name": "arith",
        "model": "mock-1",
        "cell": None,
        "tags": ["nightly", "nightly-passed"],
    }
    assert main(["nightly", str(spec), "--store", str(store)]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    tonight = Store(store).runs().sort("created_at").collect()["run_id"][-1]
    assert line.startswith(
        f"arith {tonight} (mock-1, tags nightly,nightly-passed) vs {night} (mock-1, tags nightly,nightly-passed) "
        "(completed): "
    ), line
