"""The view's pages over two real runs, through HTTP in process: each page answers 200 with what
it should show; filters, sorting and paging happen on the server; bad input is a 400 that says why."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pyarrow as pa
import pytest

from assay import _schema
from assay.store import Store
from tests.view.conftest import SCRIPT, WORSE, N, client


def test_runs_page_lists_both_runs_with_scores(view_runs):
    with client(view_runs["store"]) as http:
        page = http.get("/")
    assert page.status_code == 200
    for run in (view_runs["base"], view_runs["cand"]):
        assert f'data-run="{run}"' in page.text
    assert "view-base" in page.text and "view-cand" in page.text
    assert "<b>judge</b>" in page.text and "[" in page.text  # a mean with its interval


def test_runs_page_filters_by_text(view_runs):
    with client(view_runs["store"]) as http:
        page = http.get("/", params={"text": "view-cand"})
    assert f'data-run="{view_runs["cand"]}"' in page.text
    assert f'data-run="{view_runs["base"]}"' not in page.text


def test_run_page_shows_the_summary(view_runs):
    with client(view_runs["store"]) as http:
        page = http.get(f"/runs/{view_runs['cand']}")
    assert page.status_code == 200
    assert "Failures by reason" in page.text and "boom" in page.text
    assert 'id="fig-scores"' in page.text and 'id="fig-latency"' in page.text


def test_items_page_filters_sorts_and_pages(view_runs):
    run = view_runs["cand"]
    with client(view_runs["store"]) as http:
        first = http.get(f"/runs/{run}/items")
        failed = http.get(f"/runs/{run}/items", params={"outcome": "failed"})
        zero = http.get(f"/runs/{run}/items", params={"scorer": "judge", "high": "0.5"})
        maths = http.get(f"/runs/{run}/items", params={"annotation": "topic=maths"})
        search = http.get(f"/runs/{run}/items", params={"text": "no idea"})
        second = http.get(f"/runs/{run}/items", params={"page": "1"}, headers={"HX-Request": "true"})
    assert first.status_code == 200 and _matched(first) == N and first.text.count('class="item-row"') == 50
    assert _matched(failed) == 1 and "q40" in failed.text
    # Score 0: the worse items and the one answered with HTML (the failed one has no score).
    assert _matched(zero) == len(WORSE) + 1
    assert _matched(maths) == N // 2  # the odd indexes (the HTML item, at 5, among them)
    assert _matched(search) == len(WORSE)
    assert second.text.count('class="item-row"') == N - 50 and "<html" not in second.text  # a fragment


def test_items_sorted_by_score_put_the_zeros_first(view_runs):
    with client(view_runs["store"]) as http:
        page = http.get(f"/runs/{view_runs['cand']}/items", params={"sort": "score:judge"})
    ids = re.findall(r'class="item-link" href="[^"]*">([^<]*)</a>', page.text)
    assert set(ids[:4]) <= {f"q{i}" for i in WORSE} | {
        "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&lt;img src=x onerror=alert(1)&gt;"
    }


def test_item_page_shows_everything_of_one_item(view_runs):
    with client(view_runs["store"]) as http:
        page = http.get(f"/runs/{view_runs['cand']}/item", params={"id": "q3", "trial": "0"})
    assert page.status_code == 200
    assert "no idea at all" in page.text and 'id="expected"' in page.text
    assert "judged" in page.text and "maths" in page.text


def test_compare_page_ranks_the_changed_items(view_runs):
    with client(view_runs["store"]) as http:
        page = http.get("/compare", params={"a": view_runs["base"], "b": view_runs["cand"], "slice": "topic"})
    assert page.status_code == 200, page.text
    assert f'<span id="n-changed">{len(WORSE) + 1}</span>' in page.text
    assert 'class="del"' in page.text and 'class="ins"' in page.text  # the word diff
    assert "regressed" in page.text or "inconclusive" in page.text
    assert "By topic" in page.text
    # The view's state is its URL: the permalink names both runs and the slice.
    link = re.search(r'id="permalink" href="([^"]*)"', page.text)
    assert link and view_runs["base"] in link.group(1) and "slice=topic" in link.group(1)


@pytest.mark.parametrize(
    ("path", "params", "status", "says"),
    [
        ("/runs/nope", {}, 404, "no run"),
        ("/runs/{cand}/items", {"annotation": "topic"}, 400, "key=value"),
        ("/runs/{cand}/items", {"low": "0.5"}, 400, "needs its scorer"),
        ("/runs/{cand}/items", {"page": "-1"}, 400, "page"),
        ("/runs/{cand}/item", {"id": "zzz"}, 400, "no item"),
        ("/compare", {"a": "{base}"}, 400, "b"),
    ],
)
def test_bad_input_says_why(view_runs, path, params, status, says):
    fill = {"cand": view_runs["cand"], "base": view_runs["base"]}
    with client(view_runs["store"]) as http:
        page = http.get(path.format(**fill), params={k: v.format(**fill) for k, v in params.items()})
    assert page.status_code == status
    assert says in page.text
    assert SCRIPT not in page.text


def _matched(page) -> int:
    found = re.search(r'<span id="matched">(\d+)</span>', page.text)
    assert found, page.text[:2000]
    return int(found.group(1))


def test_a_running_run_polls_and_a_finished_one_does_not(tmp_path):
    """The runs page's rows and a run's page ask again every 2 s (htmx) while the run is running,
    and show what it has committed so far; once finished, neither polls."""
    store = Store(tmp_path / "store")
    record = {"kind": "run", "name": "live", "status": "running", "created_at": datetime.now(UTC)}
    record |= {"trials": 1, "n_planned": 10, "fail_on_item_error_rate": 1.0, "tags": []}
    store.write_run("live", record)
    items = [{"item_id": "a", "item_index": 0, "trial": 0, "outcome": "completed", "retry": 0}]
    scores = [{"item_id": "a", "item_index": 0, "trial": 0, "kind": "score", "scorer": "s", "score": 1.0}]
    store.commit_batch(
        "live",
        "part-00000-a",
        pa.Table.from_pylist(items, schema=_schema.ITEMS),
        pa.Table.from_pylist(
            [s | {"value": 1.0, "outcome": "scored"} for s in scores], schema=_schema.SCORES
        ),
    )
    with client(store.root) as http:
        runs_page, run_page = http.get("/"), http.get("/runs/live")
        assert 'hx-trigger="every 2s"' in runs_page.text and 'hx-trigger="every 2s"' in run_page.text
        assert "completed 1" in run_page.text
        store.write_run("live", record | {"status": "completed"})
        assert "hx-trigger" not in http.get("/").text and "hx-trigger" not in http.get("/runs/live").text
