"""A run's summary aggregates over its parts' scan, one statistic at a time, instead of holding
every column it uses (issue 28: the run page of a 1,000,000-item run peaked at ~1.1 GB;
docs/performance.md). Summarised in a fresh process, a large run's peak RSS stays well under what
reading the columns once took."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from assay.analysis.run_figures import RunRows
from assay.analysis.summary import summarise
from assay.store import Store
from tests.helpers.peak import assay_peak
from tests.helpers.synthetic_runs import write_run

ITEMS = 400_000
# Measured at 400,000 items (two scorers): 515 MB reading the columns once, 272-274 MB now; the
# process alone (Polars and Assay imported) is ~130 MB.
PEAK_MB = 400

SUMMARISE = """
import json, sys
from assay.analysis.summary import summarise
from assay.store import Store
summary = summarise(Store(sys.argv[1]), "big")
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"peak_mb": int(peak.split()[1]) / 1024, "summary": summary}, default=str))
"""


@pytest.mark.slow
def test_summarising_a_large_run_does_not_hold_its_columns(tmp_path) -> None:
    root = str(tmp_path / "store")
    store = Store(root)
    write_run(store, "big", ITEMS, seed=1, kept=False)  # computed from the parts, not read
    done = subprocess.run(
        [sys.executable, "-c", SUMMARISE, root], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    assert measured["peak_mb"] < PEAK_MB, (
        f"summarising {ITEMS:,} items peaked at {measured['peak_mb']:.0f} MB"
    )

    # The same document as the columns read once into frames (what the summary did before).
    scanned = RunRows.scan(store, "big").narrow()
    read_once = RunRows(
        *(rows.lazy().collect() for rows in (scanned.history, scanned.scores, scanned.requests))
    )
    assert json.dumps(measured["summary"], sort_keys=True) == json.dumps(
        summarise(store, "big", read_once), sort_keys=True, default=str
    )
    assert measured["summary"]["items"]["completed"] + measured["summary"]["items"]["failed"] == ITEMS


# `assay show` of a finished run reads its record's figures, and its judge-noise check reads two
# columns of the scores: measured at 400,000 items, 156 MB (399 MB when the check read every
# score row whole).
SHOW_PEAK_MB = 250


@pytest.mark.slow
def test_showing_a_large_finished_run_reads_neither_its_items_nor_its_scores_whole(tmp_path) -> None:
    root = str(tmp_path / "store")
    write_run(Store(root), "big", ITEMS, seed=1)
    done, peak_mb = assay_peak("show", "big", "--store", root, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["items"]["completed"] > 0
    assert peak_mb < SHOW_PEAK_MB, f"assay show of {ITEMS:,} items peaked at {peak_mb:.0f} MB"
