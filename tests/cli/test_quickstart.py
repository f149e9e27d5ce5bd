"""The README's quickstart, as a new user runs it: a fresh PREFECT_HOME, no API, no network."""

from __future__ import annotations

import json

import pytest

from assay.store import Store
from tests.conftest import REPO, run_assay

pytestmark = [pytest.mark.slow]  # subprocesses, signals, leases: seconds each


def test_quickstart_runs_offline_on_a_fresh_prefect_home(tmp_path):
    env = {"PREFECT_HOME": str(tmp_path / "fresh-prefect-home"), "HOME": str(tmp_path)}
    shown = run_assay(
        "run", str(REPO / "examples/quickstart/spec.yaml"), "--store", str(tmp_path / "s"), env=env
    )
    assert shown.returncode == 0, shown.stderr
    for text in (
        "quickstart-arithmetic",
        "40 completed",
        "exact",
        "numeric",
        "mentions_answer",
        "bare_number",
    ):
        assert text in shown.stdout, text
    assert shown.stderr == "", "no Prefect log noise by default"

    as_json = run_assay(
        "run", "examples/quickstart/spec.yaml", "--store", str(tmp_path / "s"), "--json", env=env
    )
    summary = json.loads(as_json.stdout)
    record = Store(tmp_path / "s").read_run(summary["run_id"])
    # The embedded path: no Prefect flow run, hence no temporary server was booted for it.
    assert record["prefect_flow_run_id"] is None
    assert record["status"] == "completed" and record["n_completed"] == 40
    exact = next(s for s in summary["scorers"] if s["scorer"] == "exact")
    assert 0 < exact["mean"] < 1, "the quickstart solver is right on some items and wrong on others"
