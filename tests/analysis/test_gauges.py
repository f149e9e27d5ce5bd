"""Gauges: `kind = gauge` rows beside the scores, one per measured quantity of a completed item,
written only when known, and never read as a scorer by summaries, compares, gates or power."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl
import pytest

from assay.cli import EXIT_GATE, main
from assay.outcomes import RowKind
from assay.store import Store
from assay.testing.harness import HarnessServer
from tests.conftest import openai_spec, write_jsonl, write_spec
from tests.helpers.cli import assay_json

SOLVERS = """
import time

def solve(x):
    if x == "boom":
        raise RuntimeError("down")
    return "bad" if x == "2" else str(int(x) * 2)

def slow(x):
    time.sleep(0.03)
    return "bad" if x == "2" else str(int(x) * 2)

def picky(output):
    if output == "bad":
        raise ValueError("cannot judge this")
    return 1.0
"""


def python_spec(folder, function: str = "solve", inputs=("0", "1", "2", "3", "boom")):
    (folder / "gauge_solvers.py").write_text(SOLVERS)
    write_jsonl(folder / "d.jsonl", [{"id": f"i{x}", "input": x, "expected": f"{x}{x}"} for x in inputs])
    return write_spec(
        folder,
        name="gauged",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "python", "function": f"gauge_solvers:{function}"},
        scorers=[
            {"kind": "exact_match", "name": "exact"},
            {"kind": "user_code", "name": "picky", "function": "gauge_solvers:picky"},
        ],
        fail_on_item_error_rate=1,
        fail_on_scorer_error_rate=1,  # its scorers fail on purpose
    )


def test_a_python_target_gets_a_duration_gauge_only_and_scorers_ignore_it(tmp_path, capsys):
    spec = python_spec(tmp_path)
    summary = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert summary["items"]["completed"] == 4 and summary["items"]["failed"] == 1
    store = Store(tmp_path / "s")
    items = store.run_items(summary["run_id"])
    gauges = store.run_scores(summary["run_id"], kind=RowKind.GAUGE)

    # Duration is always known; a python target measures no tokens, cost, steps: no rows, not zeros.
    assert set(gauges["scorer"]) == {"gauge.duration_ms"}
    assert sorted(gauges["item_id"]) == ["i0", "i1", "i2", "i3"], "a failed item has no gauges"
    joined = gauges.join(items, on=["item_id", "trial"], suffix="_item")
    assert (joined["value"] == joined["duration_ms_item"]).all()
    assert set(gauges["kind"]) == {"gauge"} and set(gauges["scorer_kind"]) == {"gauge"}
    assert set(gauges["outcome"]) == {"measured"} and gauges["score"].null_count() == gauges.height

    scores = store.run_scores(summary["run_id"])
    assert set(scores["kind"]) == {"score"} and set(scores["scorer"]) == {"exact", "picky"}
    assert scores["value"].to_list() == scores["score"].to_list(), "a score row's value is its score"
    assert store.run_scores(summary["run_id"], kind=None).height == scores.height + gauges.height

    # The summary's scorers are the scorers: the failing judge's rate is 1 of 4, not diluted.
    by_name = {row["scorer"]: row for row in summary["scorers"]}
    assert set(by_name) == {"exact", "picky"}
    assert by_name["picky"]["failed"] == 1 and by_name["picky"]["scored"] == 3
    assert "measured" not in by_name["picky"]
    (duration,) = summary["gauges"]
    assert duration["gauge"] == "gauge.duration_ms" and duration["n"] == 4
    assert duration["mean"] == pytest.approx(
        items.filter(pl.col("outcome") == "completed")["duration_ms"].mean()
    )
    assert duration["p50"] <= duration["p95"] <= duration["max"]

    assert main(["show", summary["run_id"], "--store", str(tmp_path / "s")]) == 0
    shown = capsys.readouterr().out
    assert "gauge.duration_ms" in shown

    from assay.report import RunData, build_report, scorer_table

    assert [row["scorer"] for row in scorer_table(RunData(store, summary["run_id"]))] == ["exact", "picky"]
    page = build_report(store, summary["run_id"])
    assert "<h3>Gauges</h3>" in page and "<code>gauge.duration_ms</code>" in page


def test_an_openai_target_gets_measured_tokens_and_a_cost_only_when_complete(tmp_path, mock, capsys):
    priced = tmp_path / "priced"
    priced.mkdir()
    spec = openai_spec(priced, mock.base_url, n=3, prices={"mock-1": {"input": 10.0, "output": 30.0}})
    summary = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    store = Store(tmp_path / "s")
    items = store.run_items(summary["run_id"])
    gauges = store.run_scores(summary["run_id"], kind=RowKind.GAUGE)
    wide = gauges.pivot(on="scorer", index=["item_id", "trial"], values="value").join(
        items, on=["item_id", "trial"]
    )
    assert wide.height == 3
    assert (wide["gauge.tokens_input"] == wide["tokens_input"]).all()
    assert (wide["gauge.tokens_output"] == wide["tokens_output"]).all()
    assert (wide["gauge.cost_usd"] == wide["cost_generation_usd"]).all() and wide["gauge.cost_usd"].min() > 0
    assert "gauge.steps" not in wide.columns and "gauge.tool_calls" not in wide.columns
    assert {g["gauge"] for g in summary["gauges"]} == {
        "gauge.cost_usd",
        "gauge.duration_ms",
        "gauge.tokens_input",
        "gauge.tokens_output",
    }
    # The run's token totals are not doubled by the token gauges.
    assert summary["tokens"]["input"] == items["tokens_input"].sum()

    unpriced = tmp_path / "unpriced"
    unpriced.mkdir()
    summary = assay_json(
        capsys, "run", str(openai_spec(unpriced, mock.base_url, n=3)), "--store", str(tmp_path / "s")
    )
    names = set(store.run_scores(summary["run_id"], kind=RowKind.GAUGE)["scorer"])
    assert names == {"gauge.duration_ms", "gauge.tokens_input", "gauge.tokens_output"}, (
        "an unpriced model's $0 is not a cost"
    )


@pytest.fixture
def harness() -> Iterator[HarnessServer]:
    with HarnessServer() as server:
        yield server


def test_an_http_agent_gets_steps_and_tool_calls_from_its_trajectory(tmp_path, harness, capsys):
    harness.configure(
        behaviors={
            "t1": {"steps": 3},
            "missing": {"trajectory": "missing"},
            "partial": {"trajectory": "partial"},
        }
    )
    write_jsonl(
        tmp_path / "d.jsonl", [{"id": i, "input": f"task {i}"} for i in ("t0", "t1", "missing", "partial")]
    )
    spec = write_spec(
        tmp_path,
        name="agent",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "http_agent", "base_url": harness.base_url, "poll_interval": 0.01},
        scorers=[{"kind": "includes", "name": "echo", "value": "task"}],
    )
    summary = assay_json(capsys, "run", str(spec), "--store", str(tmp_path / "s"))
    assert summary["items"]["completed"] == 4
    gauges = Store(tmp_path / "s").run_scores(summary["run_id"], kind=RowKind.GAUGE)
    values = {(r["item_id"], r["scorer"]): r["value"] for r in gauges.iter_rows(named=True)}
    assert values[("t0", "gauge.steps")] == 2 and values[("t0", "gauge.tool_calls")] == 2
    assert values[("t1", "gauge.steps")] == 3 and values[("t1", "gauge.tool_calls")] == 3
    # No trajectory: steps unknown. A partial one: its steps are counted (dropped ones too), but
    # the dropped steps' tool calls are unknown, so no tool-call gauge rather than an undercount.
    assert ("missing", "gauge.steps") not in values and ("missing", "gauge.tool_calls") not in values
    assert values[("partial", "gauge.steps")] == 4 and ("partial", "gauge.tool_calls") not in values
    # The agent's own token counts and cost are caller-reported: not gauges.
    assert set(gauges["scorer"]) == {"gauge.duration_ms", "gauge.steps", "gauge.tool_calls"}
    assert gauges.filter(pl.col("scorer") == "gauge.duration_ms").height == 4
    assert [s["scorer"] for s in summary["scorers"]] == ["echo"]
    steps = next(g for g in summary["gauges"] if g["gauge"] == "gauge.steps")
    assert steps["n"] == 3 and steps["mean"] == pytest.approx(3.0)


def test_compare_reports_gauges_beside_the_verdicts_and_never_gates_on_them(tmp_path, capsys):
    store = str(tmp_path / "s")
    run_ids = {}
    for function in ("solve", "slow"):
        folder = tmp_path / function
        folder.mkdir()
        spec = python_spec(folder, function, inputs=("0", "1", "2", "3"))
        summary = assay_json(capsys, "run", str(spec), "--store", store)
        run_ids[function] = summary["run_id"]

    doc = assay_json(
        capsys,
        "compare",
        run_ids["solve"],
        "--candidate",
        run_ids["slow"],
        "--store",
        store,
        "--resamples",
        "200",
        code=EXIT_GATE,  # picky fails on 1 of 4 items on each side: its error-rate gate fails
    )
    assert [row["scorer"] for row in doc["scorers"]] == ["exact", "picky"]
    assert doc["scorers_only_in"] == {"baseline": [], "candidate": []}
    gated = {gate.get("scorer") for gate in doc["gates"]}
    assert gated == {None, "exact", "picky"}, "no gate on a gauge"
    assert all("gauge" not in message for message in doc["failed_gates"])
    (duration,) = doc["gauges"]
    assert duration["gauge"] == "gauge.duration_ms" and duration["n_pairs"] == 4
    assert duration["candidate_mean"] > duration["baseline_mean"] + 20, "the slow solver sleeps 30 ms"
    assert duration["delta"] == pytest.approx(duration["candidate_mean"] - duration["baseline_mean"])
    stored = pl.read_parquet(f"{store}/comparisons/**/*.parquet", hive_partitioning=True)
    assert set(stored["scorer"]) == {"exact", "picky"}

    from assay.analysis.lines import comparison_markdown

    assert "gauge.duration_ms" in comparison_markdown(doc)
    main(
        ["compare", run_ids["solve"], "--candidate", run_ids["slow"], "--store", store, "--resamples", "200"]
    )
    assert "gauge.duration_ms" in capsys.readouterr().out

    power = assay_json(capsys, "power", run_ids["solve"], "--mde", "0.1", "--store", store)
    assert [row["scorer"] for row in power["scorers"]] == ["exact", "picky"]


def test_a_rescore_carries_its_sources_gauges_forward(tmp_path, capsys):
    spec = python_spec(tmp_path)
    store = str(tmp_path / "s")
    source = assay_json(capsys, "run", str(spec), "--store", store)
    rescore = assay_json(
        capsys,
        "rescore",
        source["run_id"],
        "--store",
        store,
        "--scorer",
        "{kind: includes, name: has, value: '1'}",
    )
    columns = ["item_id", "trial", "scorer", "value", "kind", "outcome"]
    before = Store(store).run_scores(source["run_id"], kind=RowKind.GAUGE).select(columns).sort(columns)
    after = Store(store).run_scores(rescore["run_id"], kind=RowKind.GAUGE).select(columns).sort(columns)
    assert before.height == 4 and after.equals(before), "the target was not run again: same measurements"
    assert [s["scorer"] for s in rescore["scorers"]] == ["has"]
    assert rescore["gauges"] == source["gauges"]


def test_scorer_names_may_not_take_the_gauge_prefix(tmp_path, capsys):
    spec = openai_spec(
        tmp_path, "http://127.0.0.1:1/v1", n=1, scorers=[{"kind": "exact_match", "name": "gauge.x"}]
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    assert "reserved for gauges" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()
