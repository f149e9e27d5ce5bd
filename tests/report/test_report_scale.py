"""The report of a large run holds what a page can: the item browser its first `BROWSED` item x
trials (dataset order), the failures section its first `LISTED` failures with their count, and
the histograms their bins, not every value (a page of a million items was 365 MB and took 52 s
to write; docs/performance.md)."""

from __future__ import annotations

import json
import re

import polars as pl
import pytest

from assay.outcomes import ItemOutcome
from assay.report import data, write_report
from assay.store import Store
from tests.helpers.peak import assay_peak
from tests.helpers.synthetic_runs import write_run

ITEMS = 3_000


def test_a_large_runs_report_holds_its_first_items_its_first_failures_and_its_bins(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setattr(data, "LISTED", 20)
    monkeypatch.setenv("ASSAY_VIEW_URL", "http://127.0.0.1:8484")
    store = Store(tmp_path / "store")
    write_run(store, "big", ITEMS, seed=1)
    page = write_report(store, "big").read_text(encoding="utf-8")

    browsed = re.search(r'<script type="application/json" id="items-data">(.*?)</script>', page, re.DOTALL)
    assert browsed is not None
    rows = json.loads(browsed.group(1))["rows"]
    assert [row["id"] for row in rows] == [f"q{i}" for i in range(data.BROWSED)]
    assert rows[7]["input"] == "What is 7 + 7?" and rows[7]["expected"] == "14"
    assert f"the first {data.BROWSED:,} of the run's {ITEMS:,} item × trials" in page
    assert 'id="view-items" href="http://127.0.0.1:8484/runs/big/items"' in page

    items = store.run_items("big").sort("item_index")
    failed = items.filter(pl.col("outcome") == ItemOutcome.FAILED)["item_id"].to_list()
    assert len(failed) > 20
    listed = re.findall(r"<tr><td><code>(q\d+)</code></td><td>", page.split('<section id="failures">')[1])
    assert listed == failed[:20], "the first 20 failures, in dataset order"
    assert f"Failures ({len(failed):,} items)" in page and f"The first 20 of {len(failed):,}" in page
    assert 'href="http://127.0.0.1:8484/runs/big/items?outcome=failed"' in page

    # The figures are bars of counts: no histogram of every value in the page.
    drawn = {
        name: _traces(page.split(f'id="fig-{name}"')[1]) for name in ("latency", "cost", "distributions")
    }
    assert {trace["type"] for traces in drawn.values() for trace in traces} == {"bar"}
    assert [sum(trace["y"]) for trace in drawn["latency"]] == [
        items.filter(pl.col("outcome") == outcome).height for outcome in ("completed", "failed")
    ]
    assert sum(drawn["cost"][0]["y"]) == ITEMS
    assert [sum(trace["y"]) for trace in drawn["distributions"]] == [ITEMS - len(failed)] * 2


def _traces(figure_html: str) -> list[dict]:
    """The traces of a figure drawn by `plotly.io.to_html` (its `Plotly.newPlot(id, data, ...)`)."""
    start = figure_html.index("[", figure_html.index("Plotly.newPlot("))
    traces, _ = json.JSONDecoder().raw_decode(figure_html[start:])
    return traces


# `assay report` as its own process over a 400,000-item run: measured 310-315 MB with each figure
# reading its own columns, 674 MB with the items' and scores' columns held whole.
REPORT_PEAK_MB = 450


@pytest.mark.slow
def test_a_large_runs_report_reads_each_figures_columns_not_every_row_at_once(tmp_path) -> None:
    root = str(tmp_path / "store")
    write_run(Store(root), "big", 400_000, seed=1)
    done, peak_mb = assay_peak("report", "big", "--store", root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().endswith("big.html")
    assert peak_mb < REPORT_PEAK_MB, f"assay report of 400,000 items peaked at {peak_mb:.0f} MB"
