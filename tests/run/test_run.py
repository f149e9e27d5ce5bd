"""The run flow end to end, in process (embedded path), against the mock server on 127.0.0.1."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from assay.cli import EXIT_GATE, main
from assay.store import Store
from tests.conftest import openai_spec, write_jsonl, write_spec
from tests.helpers.cli import assay_json


def test_openai_run_stores_items_scores_and_usage(tmp_path, mock, capsys):
    mock.configure(answers={"What is 3 + 3?": "6", "What is 4 + 4?": "eight"})
    spec = openai_spec(tmp_path, mock.base_url, n=6)
    summary = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "store"))

    assert summary["status"] == "completed"
    assert summary["items"]["completed"] == 6
    store = Store(tmp_path / "store")
    items = store.run_items(summary["run_id"]).sort("item_index")
    scores = store.run_scores(summary["run_id"])
    assert items.height == 6 and scores.height == 12
    # The mock echoes unknown prompts, so only q3 answers right; q4 answers in words.
    exact = dict(scores.filter(pl.col("scorer") == "exact").select("item_id", "score").iter_rows())
    assert exact["q3"] == 1.0 and exact["q4"] == 0.0 and exact["q0"] == 0.0
    assert items["tokens_input"].to_list() == [5] * 6  # "What is i + i?" is five words
    assert items["model"].unique().to_list() == ["mock-1"]
    assert items["wire_ms"].min() > 0 and items["retries"].sum() == 0
    assert json.loads(items.filter(pl.col("item_id") == "q4")["output"][0]) == "eight"
    exact_stats = next(s for s in summary["scorers"] if s["scorer"] == "exact")
    assert exact_stats["mean"] == pytest.approx(1 / 6) and exact_stats["scored"] == 6
    assert mock.stats()["requests"] == 6


def test_failures_are_outcomes_not_scores_and_trip_the_gate(tmp_path, mock, capsys):
    mock.configure(faults=[{"status": 400, "times": -1, "match": "What is 1 + 1?"}])
    spec = openai_spec(tmp_path, mock.base_url, n=5)
    # 1 failed of 5 attempted is 20% > the default 5% limit.
    summary = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "store"), code=EXIT_GATE)

    assert summary["status"] == "failed_gate" and summary["item_error_rate"] == pytest.approx(0.2)
    store = Store(tmp_path / "store")
    failed = store.run_items(summary["run_id"]).filter(pl.col("outcome") == "failed")
    assert failed["item_id"].to_list() == ["q1"]
    assert failed["failure_http_status"].to_list() == [400]
    assert failed["failure_retryable"].to_list() == [False]
    assert failed["failure_request_id"][0].startswith("req_")
    assert failed["output"].to_list() == [None]
    # A failed item gets no scores at all: it is a failure, not a zero.
    assert store.run_scores(summary["run_id"]).filter(pl.col("item_id") == "q1").height == 0
    assert store.read_run(summary["run_id"])["status"] == "failed_gate"


def test_gate_limit_of_one_disables_it(tmp_path, mock, capsys):
    mock.configure(faults=[{"status": 400, "times": -1}])
    spec = openai_spec(tmp_path, mock.base_url, n=3, fail_on_item_error_rate=1)
    summary = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "store"))
    assert summary["items"]["failed"] == 3 and summary["status"] == "completed"


def test_python_target_caller_report_and_exceptions(tmp_path, capsys):
    (tmp_path / "solver_mod.py").write_text(
        "import asyncio\n"
        "async def solve(x, trial):\n"
        "    await asyncio.sleep(0)\n"
        "    if x == 'boom':\n"
        "        raise RuntimeError('solver exploded')\n"
        "    return {'output': x.upper(), 'cost': 0.25, 'metadata': {'trial_seen': trial, 'tokens': 99}}\n"
    )
    write_jsonl(tmp_path / "d.jsonl", [{"input": "a", "expected": "A"}, {"input": "boom", "expected": "B"}])
    spec = write_spec(
        tmp_path,
        name="py",
        dataset={"path": "d.jsonl"},
        target={"kind": "python", "function": "solver_mod:solve"},
        scorers=[{"kind": "exact_match"}],
        trials=2,
        fail_on_item_error_rate=1,
    )
    summary = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    items = Store(tmp_path / "s").run_items(summary["run_id"])
    assert items.height == 4
    ok = items.filter(pl.col("outcome") == "completed").sort("trial")
    assert ok["caller_cost_usd"].to_list() == [0.25, 0.25]
    assert [json.loads(m) for m in ok["caller_metadata"]] == [{"trial_seen": 0}, {"trial_seen": 1}]
    # A reserved key (tokens) is kept apart: it looks like a measurement and is not one.
    assert [json.loads(m) for m in ok["caller_reserved"]] == [{"tokens": 99}] * 2
    assert ok["tokens_input"].to_list() == [None, None]
    # Caller-reported cost is never measured cost: a Python target's spend is not known.
    assert ok["cost_usd"].to_list() == [0.0, 0.0]
    assert ok["cost_completeness"].to_list() == ["incomplete"] * 2
    assert [json.loads(r) for r in ok["cost_reasons"]] == [{"uninstrumented": 1}] * 2
    bad = items.filter(pl.col("outcome") == "failed")
    assert bad.height == 2 and bad["error"][0] == "RuntimeError: solver exploded"
    assert bad["failure_kind"][0] == "exception"
    # Without an id field, ids are content hashes, stable across runs.
    again = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    ids_again = Store(tmp_path / "s").run_items(again["run_id"])["item_id"].sort().to_list()
    assert ids_again == items["item_id"].sort().to_list()


def test_an_invalid_caller_cost_is_ignored_with_a_warning(tmp_path, capsys, caplog):
    """As the seed: a bad caller-reported cost is a report to ignore, not a failure of the item;
    the seed's reserved metadata keys are kept apart as Assay's are."""
    (tmp_path / "bad_cost_solver.py").write_text(
        "COSTS = {'a': -1, 'b': float('nan'), 'c': 'free', 'd': True}\n"
        "def solve(x):\n"
        "    meta = {'models': ['m'], 'modelCallCounts': {'m': 2}, 'workflows': ['w'],\n"
        "            'workflowCallCounts': {'w': 1}, 'tokens': 9, 'agentCalls': 3, 'note': x}\n"
        "    return {'output': x, 'cost': COSTS[x], 'metadata': meta}\n"
    )
    write_jsonl(tmp_path / "d.jsonl", [{"input": x, "expected": x} for x in "abcd"])
    spec = write_spec(
        tmp_path,
        name="py",
        dataset={"path": "d.jsonl"},
        target={"kind": "python", "function": "bad_cost_solver:solve"},
        scorers=[{"kind": "exact_match"}],
    )
    with caplog.at_level("WARNING", logger="assay.targets.python"):
        summary = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert summary["items"]["completed"] == 4
    items = Store(tmp_path / "s").run_items(summary["run_id"])
    assert items["caller_cost_usd"].to_list() == [None] * 4
    warnings = sorted(r.getMessage() for r in caplog.records if r.name == "assay.targets.python")
    assert len(warnings) == 4
    assert warnings[0].startswith("ignoring the cost ") and "bad_cost_solver:solve" in warnings[0]
    assert {w.split()[3] for w in warnings} == {"-1", "nan", "'free'", "True"}
    for text in items["caller_reserved"]:
        assert set(json.loads(text)) == {
            "models",
            "modelCallCounts",
            "workflows",
            "workflowCallCounts",
            "tokens",
            "agentCalls",
        }
    assert sorted(json.loads(m)["note"] for m in items["caller_metadata"]) == list("abcd")


def test_the_timing_summary_is_over_completed_items(tmp_path, capsys):
    """As the seed: a failure's duration measures the failure, not the target."""
    (tmp_path / "slow_fail.py").write_text(
        "import time\n"
        "def solve(x):\n"
        "    if x.startswith('fail'):\n"
        "        time.sleep(0.3)\n"
        "        raise RuntimeError('gave up')\n"
        "    return x\n"
    )
    write_jsonl(
        tmp_path / "d.jsonl", [{"input": x, "expected": x} for x in ("a", "b", "c", "fail1", "fail2")]
    )
    spec = write_spec(
        tmp_path,
        name="py",
        dataset={"path": "d.jsonl"},
        target={"kind": "python", "function": "slow_fail:solve"},
        scorers=[{"kind": "exact_match"}],
        fail_on_item_error_rate=1,
    )
    summary = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert summary["items"] == {**summary["items"], "completed": 3, "failed": 2}
    items = Store(tmp_path / "s").run_items(summary["run_id"])
    done = items.filter(pl.col("outcome") == "completed")["duration_ms"]
    assert items.filter(pl.col("outcome") == "failed")["duration_ms"].min() >= 300
    assert summary["duration_ms"]["max"] == done.max()
    assert summary["duration_ms"]["mean"] == pytest.approx(done.mean())


def test_item_timeout_fails_the_item(tmp_path, mock, capsys):
    mock.configure(faults=[{"delay_ms": 3000, "times": 1, "match": "What is 0 + 0?"}])
    spec = openai_spec(tmp_path, mock.base_url, n=3, item_timeout=0.5, fail_on_item_error_rate=1)
    summary = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    items = Store(tmp_path / "s").run_items(summary["run_id"])
    slow = items.filter(pl.col("item_id") == "q0").to_dicts()[0]
    assert slow["outcome"] == "failed" and slow["failure_kind"] == "timeout"
    assert "item_timeout" in slow["error"] and slow["duration_ms"] < 2000
    assert summary["items"]["completed"] == 2


def test_show_and_ls(tmp_path, mock, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=2)
    store = str(tmp_path / "s")
    summary = assay_json(capsys, "run", str(spec), "--store", store)
    shown = assay_json(capsys, "show", summary["run_id"], "--store", store)
    assert shown["items"] == summary["items"] and shown["scorers"] == summary["scorers"]
    assert main(["ls", "--store", store, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in listed] == [summary["run_id"]] and listed[0]["n_completed"] == 2
    assert main(["show", "nope", "--store", store]) == 2
    assert "no run 'nope'" in capsys.readouterr().err


def test_api_key_comes_from_env_and_is_never_stored(tmp_path, mock, capsys, monkeypatch):
    monkeypatch.setenv("ASSAY_TEST_KEY", "sk-secret-value-123")
    spec = openai_spec(tmp_path, mock.base_url, n=2)
    doc = spec.read_text().replace("prompt:", "api_key_env: ASSAY_TEST_KEY\n  prompt:")
    spec.write_text(doc)
    assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert mock.stats()["last_authorization"] == "Bearer sk-secret-value-123"
    for path in Path(tmp_path / "s").rglob("*.parquet"):
        assert b"sk-secret-value-123" not in path.read_bytes()
    monkeypatch.delenv("ASSAY_TEST_KEY")
    assert main(["run", str(spec), "--store", str(tmp_path / "s2")]) == 2
    assert "ASSAY_TEST_KEY" in capsys.readouterr().err
    assert not (tmp_path / "s2").exists()


CRASHING_TARGET = '''
import asyncio
import pathlib

class Crash(BaseException):
    """An infrastructure failure: not an Exception, so no target turns it into an item's failure."""

MARK = pathlib.Path(__file__).with_name("crashed")

async def solve(x):
    await asyncio.sleep(0.001 * int(x))
    if x == "20" and not MARK.exists():
        MARK.touch()
        raise Crash("disk on fire")
    return x
'''


def test_a_crash_ends_the_run_as_failed_and_resume_finishes_it(tmp_path, capsys):
    """Something other than a target's failure stops the run after its record exists: the run
    is recorded as `failed` with the error (never left `running`), and `assay resume` finishes it."""
    (tmp_path / "crashing_target.py").write_text(CRASHING_TARGET)
    write_jsonl(tmp_path / "d.jsonl", [{"input": str(i), "expected": str(i)} for i in range(25)])
    spec = write_spec(
        tmp_path,
        name="crashing",
        dataset={"path": "d.jsonl"},
        target={"kind": "python", "function": "crashing_target:solve"},
        scorers=[{"kind": "exact_match"}],
        concurrency=1,
    )
    store = tmp_path / "s"
    with pytest.raises(BaseException) as crashed:
        main(["run", str(spec), "--store", str(store), "-q"])
    assert type(crashed.value).__name__ == "Crash"
    (partition,) = (store / "runs").glob("run_id=*")
    run_id = partition.name.removeprefix("run_id=")
    assert (
        f"run {run_id} is recorded as failed; `assay resume {run_id}` continues it" in crashed.value.__notes__
    )
    record = Store(store).read_run(run_id)
    assert record["status"] == "failed" and record["error"] == "Crash: disk on fire"
    assert (record["n_completed"], record["n_cancelled"], record["n_planned"]) == (20, 5, 25)

    summary = assay_json(capsys, "resume", run_id, "--store", str(store))
    assert summary["status"] == "completed" and summary["error"] is None
    assert summary["items"]["completed"] == 25
    assert Store(store).run_items(run_id)["item_id"].n_unique() == 25


def test_scores_are_stored_at_full_precision(tmp_path, capsys):
    """Decided (docs/differences.md): the seed rounds stored scores to 3 decimals; Assay keeps
    the scorer's number, so paired deltas and CIs are not made of rounding."""
    (tmp_path / "third_scorer.py").write_text("def third(output):\n    return 1 / 3\n")
    write_jsonl(tmp_path / "d.jsonl", [{"input": "a", "expected": "a"}])
    spec = write_spec(
        tmp_path,
        name="py",
        dataset={"path": "d.jsonl"},
        target={"kind": "python", "function": "third_scorer:third"},
        scorers=[{"kind": "user_code", "name": "third", "function": "third_scorer:third"}],
    )
    summary = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    scores = Store(tmp_path / "s").run_scores(summary["run_id"])
    assert scores["score"].to_list() == [1 / 3] and scores["value"].to_list() == [1 / 3]
    assert summary["scorers"][0]["mean"] == 1 / 3
