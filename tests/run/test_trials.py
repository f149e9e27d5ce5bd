"""Trials: a seeded shuffle of item x trial that a resume keeps, and pass@k in the summary."""

from __future__ import annotations

import json

import pytest

from assay.analysis.tallies import pass_at_k
from assay.cli import main
from assay.run.plan import execution_order
from tests.conftest import write_jsonl, write_spec

SOLVER = """
import json, pathlib
LOG = pathlib.Path(__file__).with_name("order.log")

def solve(x, trial):
    with LOG.open("a") as log:
        log.write(json.dumps([x, trial]) + "\\n")
    # item k passes on trials < k: item 0 never, item 3 on every one of 3 trials
    return "yes" if trial < int(x) else "no"
"""


def test_trials_run_in_a_seeded_shuffle_and_report_pass_at_k(tmp_path, capsys):
    (tmp_path / "trial_solver.py").write_text(SOLVER)
    write_jsonl(tmp_path / "d.jsonl", [{"input": str(i), "expected": "yes"} for i in range(4)])
    spec = write_spec(
        tmp_path,
        name="trials",
        dataset={"path": "d.jsonl"},
        target={"kind": "python", "function": "trial_solver:solve"},
        scorers=[{"kind": "exact_match"}],
        trials=3,
        seed=11,
        concurrency=1,
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "s"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    executed = [tuple(json.loads(line)) for line in (tmp_path / "order.log").read_text().splitlines()]
    expected = [(str(p), t) for p, t in execution_order(4, 3, 11)]
    assert executed == expected and executed != sorted(executed), "a seeded shuffle, not dataset order"
    assert execution_order(4, 3, 11) == execution_order(4, 3, 11) != execution_order(4, 3, 12)

    (stats,) = summary["scorers"]
    # Items pass on 0, 1, 2 and 3 of their 3 trials.
    assert stats["mean_over_trials"] == pytest.approx((0 + 1 / 3 + 2 / 3 + 1) / 4)
    assert stats["pass_at_k"]["1"] == pytest.approx((0 + 1 / 3 + 2 / 3 + 1) / 4)
    assert stats["pass_at_k"]["3"] == pytest.approx(3 / 4)
    assert stats["pass_at_k"]["2"] == pytest.approx((0 + pass_at_k(3, 1, 2) + pass_at_k(3, 2, 2) + 1) / 4)


@pytest.mark.parametrize(
    "n, c, k, expected", [(3, 1, 2, 2 / 3), (5, 0, 3, 0.0), (5, 5, 1, 1.0), (10, 3, 1, 0.3)]
)
def test_pass_at_k(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected)
