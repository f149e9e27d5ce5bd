"""A run's summary, computed with Polars from what the store holds, and closing a run.

The summary is computed from the committed Parquet parts, not from memory, so a resumed run's
summary covers the items of every execution, exactly once each. What it computes from the parts
(`part_figures`) is kept in the run's closing record (`runs.summary_json`): a finished run's
summary is then read, not computed again.

What it computes from the parts is `assay.analysis.run_figures`'.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any, TypedDict

from assay import _schema, numbers
from assay.analysis.error_rates import item_error_rate, run_gates
from assay.analysis.run_figures import RunRows, keep_figures, kept_figures, part_figures
from assay.calls.accounting import Budget, BudgetColumns
from assay.calls.capture import CaptureManifest, Recorder
from assay.outcomes import (
    TOKEN_KINDS,
    ItemOutcome,
    RunStatus,
    SpendKind,
    spend_column,
    token_column,
)
from assay.run import record as run_record
from assay.store import Store, stored_form


class CostSummary(TypedDict):
    """A run's measured cost, as its summary gives it (`runs.cost_*` and `operations`)."""

    usd: float
    completeness: str
    reasons: dict[str, int]
    generation_usd: float
    judging_usd: float
    operations: int
    unpriced_models: list[str]


class _Summary(TypedDict):
    run_id: str
    name: str
    matrix_id: str | None
    cell: str | None
    source_run_id: str | None
    status: str
    error: str | None
    planned: int
    items: dict[str, int]
    failure_kinds: dict[str, int]
    finish_reasons: dict[str, int]
    failures: list[dict[str, Any]]
    item_error_rate: float | None
    fail_on_item_error_rate: float
    fail_on_scorer_error_rate: float | None
    gates: list[dict[str, Any]]
    gate_passed: bool
    scorers: list[dict[str, Any]]
    gauges: list[dict[str, Any]]
    teardown_errors: list[str]
    n_teardown_errors: int
    duration_ms: dict[str, float | None]
    timing_by_model: list[dict[str, Any]]
    batches: dict[str, Any] | None
    tokens: dict[str, int]
    cost: CostSummary
    budget: BudgetColumns
    caller_cost_usd: float | None
    wall_ms: float | None
    rate_control: dict[str, Any] | None
    answers: dict[str, int]


# `total=False` for the keys only some summaries have (`NotRequired` is not seen at run time
# under `from __future__ import annotations` on Python 3.11).
class RunSummary(_Summary, total=False):
    """What `summarise` and `close_run` say about a run: the CLI prints it, flows publish it, the
    report reads it. Counts by word are keyed by `assay.outcomes` values (`items` by
    `ItemOutcome`, `tokens` by `TokenKind`); `accounting`, `budget` and `capture` hold columns of
    the run's record (a test keeps them in step with `assay._schema.RUNS`).

    Args:
        run_id: the run.
        name: the spec's name.
        matrix_id: the matrix the run is a cell of, if any.
        cell: its cell's name.
        source_run_id: for a rescore, the run it rescored.
        status: the run's status (`RunStatus`).
        error: why it failed (status `failed`).
        planned: items x trials planned.
        items: item x trials by outcome, every outcome a key.
        failure_kinds: the failed ones by failure kind, every `FailureKind` a key: among them the
            replies that were no answer (`refusal`, `length`, `unasked_tool_call`).
        finish_reasons: item x trials by why their model stopped, every `FinishReason` a key
            (items no model answered are not counted).
        failures: the failed items grouped by error, most frequent first (`failure_groups`).
        item_error_rate: failed / (completed + failed); None when nothing was attempted.
        fail_on_item_error_rate: the item error-rate gate's limit.
        fail_on_scorer_error_rate: the scorer error-rate gate's limit (None: a run from before it).
        gates: the gates the run applied (`run_gates`), each with whether it passed and why.
        gate_passed: whether every gate passed.
        scorers: per scorer, the statistics of its scores, its outcome counts and its first error
            (`first_error`, in dataset order; None when it never failed).
        gauges: per gauge, the statistics of its measurements (`gauge_stats`).
        teardown_errors: the first few sandbox teardown failures.
        n_teardown_errors: how many there were.
        duration_ms: mean, min, p50, p95 and max of the completed items' durations.
        timing_by_model: per generation model, the calls' timing (`model_timing`).
        batches: batch mode's provider batches (`batch_stats`); None without batch mode.
        tokens: the run's tokens by kind.
        answers: what the completed items' answers were beyond words: `tool_calls` (items whose
            answer was tool calls), `calls` (the calls they made) and `reasoned` (items whose
            model reasoned: reasoning tokens counted).
        cost: its measured cost.
        accounting: the run's accounting columns (`run_accounting`); `close_run` moves them into
            the run's record and leaves them out of the summary it returns.
        budget: the budget's columns.
        caller_cost_usd: the cost the target's own code reported, summed; None if none did.
        wall_ms: the last execution's wall time.
        capture: the request sidecar's manifest, once `close_run` has recorded it.
        rate_control: the endpoint's adaptive rate controller's state and history
            (`assay.calls.rate.RateController.summary`); None for targets without one.
        compare_to: a sequential compare's settings and result (the run's `compare_*` columns),
            once `close_run` has recorded them.
    """

    accounting: dict[str, Any]
    capture: CaptureManifest
    compare_to: dict[str, Any]


def summarise(
    store: Store, run_id: str, rows: RunRows | None = None, record: _schema.RunRecord | None = None
) -> RunSummary:
    """The summary of one stored run: outcome counts, per-scorer statistics, per-gauge statistics,
    durations, gate.

    A finished run's figures were computed from its parts as it closed and kept in its record
    (`runs.summary_json`, `part_figures`): read from there, the summary of a million items takes
    milliseconds, not a second. A running run's, or one closed by an older Assay, are computed.

    Args:
        store: the store.
        run_id: the run.
        rows: its rows, whose figures are computed (never the record's kept ones); default its
            parts' (`RunRows.scan`). Only the columns it uses are read (`RunRows.narrow`); rows
            read whole give the same summary, digit for digit.
        record: its record as just read (`Store.read_run`), by a caller that needs it too.
    """
    record = record if record is not None else store.read_run(run_id)
    figures = kept_figures(record) if rows is None else None
    if figures is None:
        figures = part_figures(store, run_id, record, rows)
    return _summary(run_id, record, figures)


def _summary(run_id: str, record: _schema.RunRecord, figures: dict[str, Any]) -> RunSummary:
    """A run's summary: its parts' figures (`part_figures`) with what its record says (names,
    status, the gates' limits, budget, rate control, compare)."""
    counts = figures["items"]
    accounting = figures["accounting"]
    limit = record["fail_on_item_error_rate"]
    gates = run_gates(counts, limit, figures["scorers"], record.get("fail_on_scorer_error_rate"))
    reasons = json.loads(accounting["cost_reasons"]) if accounting["cost_reasons"] else {}
    return {
        "run_id": run_id,
        "name": record["name"],
        "matrix_id": record["matrix_id"],
        "cell": record["cell"],
        "source_run_id": record.get("source_run_id"),
        "status": record["status"],
        "error": record.get("error"),
        "planned": record["n_planned"],
        "items": counts,
        "failure_kinds": figures["failure_kinds"],
        "finish_reasons": figures["finish_reasons"],
        "failures": figures["failures"],
        "item_error_rate": item_error_rate(counts),
        "fail_on_item_error_rate": limit,
        "fail_on_scorer_error_rate": record.get("fail_on_scorer_error_rate"),
        "gates": gates,
        "gate_passed": all(gate["passed"] for gate in gates),
        "scorers": figures["scorers"],
        "gauges": figures["gauges"],
        "teardown_errors": figures["teardown_errors"],
        "n_teardown_errors": figures["n_teardown_errors"],
        "duration_ms": figures["duration_ms"],
        "timing_by_model": figures["timing_by_model"],
        "batches": figures["batches"],
        "tokens": {kind: accounting[token_column(kind)] for kind in TOKEN_KINDS},
        "answers": figures["answers"],
        "cost": {
            "usd": accounting["cost_usd"],
            "completeness": accounting["cost_completeness"],
            "reasons": reasons,
            "generation_usd": accounting[spend_column(SpendKind.GENERATION)],
            "judging_usd": accounting[spend_column(SpendKind.JUDGING)],
            "operations": accounting["operations"],
            "unpriced_models": figures["unpriced_models"],
        },
        "accounting": accounting,
        "budget": {
            "budget_limit_usd": record.get("budget_limit_usd"),
            "budget_spent_usd": record.get("budget_spent_usd"),
            "budget_status": record.get("budget_status"),
            "budget_closed_by": record.get("budget_closed_by"),
        },
        "caller_cost_usd": figures["caller_cost_usd"],
        "wall_ms": record.get("wall_ms"),
        "rate_control": json.loads(record["rate_control"]) if record.get("rate_control") else None,
        **compared_columns(record),
    }


def compared_columns(record: dict[str, Any]) -> dict[str, Any]:
    """A run's sequential compare as its summary's `compare_to` (its record's `compare_*`
    columns); nothing for a run without one."""
    if not record.get("compare_baseline"):
        return {}
    return {
        "compare_to": {name: record.get(name) for name in _schema.RUNS.names if name.startswith("compare_")}
    }


def close_run(
    store: Store,
    run_id: str,
    record: dict[str, Any],
    *,
    wall_ms: float,
    budget: Budget,
    capture: Recorder | None = None,
    stopped: RunStatus | None = None,
    error: str | None = None,
    rate_control: dict[str, Any] | None = None,
    compared: dict[str, Any] | None = None,
    stopped_early: bool = False,
) -> RunSummary:
    """Summarise, apply the gate and record the run's final status; returns the summary.

    Args:
        store: the store.
        run_id: the run.
        record: the run's record as the process holding its lease keeps it (`RunPlan.record`):
            its final revision is written after it (`assay/run/record.py`), not read again.
        wall_ms: how long this execution took.
        budget: the run's budget, recorded on the run.
        capture: the run's request recorder, whose manifest is recorded on the run.
        stopped: `cancelled` or `failed` when the execution stopped before the end: that is the
            run's status, and the planned items without a row are counted as `cancelled`.
        error: why it failed (status `failed`).
        rate_control: the endpoint's rate controller's state and history (`assay.calls.rate`).
        compared: a sequential compare's result columns (`compare_*`), recorded on the run.
        stopped_early: its verdict stopped the run: `stopped_early` unless the gate failed, and
            the items it did not run are counted as `cancelled`.
    """
    stored = stored_form(run_id, record)  # as a read of the record would give it
    figures = part_figures(store, run_id, stored)
    kept = keep_figures(figures)  # before the cancelled are counted below: as a read computes them
    summary = _summary(run_id, stored, figures)
    counts = summary["items"]
    if stopped is not None or stopped_early:
        counts[ItemOutcome.CANCELLED] = stored["n_planned"] - sum(counts.values())
    if stopped is not None:
        status = stopped
    elif not summary["gate_passed"]:
        status = RunStatus.FAILED_GATE
    else:
        status = RunStatus.STOPPED_EARLY if stopped_early else RunStatus.COMPLETED
    changes = dict(
        status=status.value,
        error=error,
        finished_at=datetime.now(UTC),
        item_error_rate=summary["item_error_rate"],
        wall_ms=wall_ms,
        **{f"n_{outcome.value}": counts[outcome.value] for outcome in ItemOutcome},
        **summary.pop("accounting"),
        **budget.columns(),
        **(capture.manifest() if capture is not None else {}),
        rate_control=json.dumps(rate_control) if rate_control is not None else None,
        **(compared or {}),
        summary_json=kept,
    )
    run_record.close(store, run_id, record, changes)
    summary.update(
        status=status.value, error=error, wall_ms=wall_ms, budget=budget.columns(), rate_control=rate_control
    )
    if capture is not None:
        summary["capture"] = capture.manifest()
    summary.update(compared_columns({**stored, **changes}))
    return summary


def matrix_summary(cells: list[dict[str, Any]]) -> dict[str, Any]:
    """The summaries of a matrix's cells under one status: `failed_gate` when any cell failed."""
    failed = any(cell["status"] == RunStatus.FAILED_GATE for cell in cells)
    return {
        "matrix_id": cells[0]["matrix_id"],
        "name": cells[0]["name"],
        "status": (RunStatus.FAILED_GATE if failed else RunStatus.COMPLETED).value,
        "cells": cells,
    }


def failure_message(summary: dict[str, Any]) -> str | None:
    """Why a run — or a matrix's cells — failed, in a line: its gate, what stopped it, or why it
    could not start; None when it did not fail (completed, stopped early on its compare's verdict).

    Args:
        summary: a run's summary, or a matrix's (`matrix_summary`).
    """
    if "cells" in summary:
        failed = [
            f"cell {cell['cell']}: {why}" for cell in summary["cells"] if (why := failure_message(cell))
        ]
        return "; ".join(failed) or None
    status = summary["status"]
    if status == RunStatus.FAILED_GATE:
        failed_gates = [gate for gate in summary.get("gates", []) if not gate["passed"]]
        return "; ".join(f"{gate['message']} (fail_on_{gate['gate']})" for gate in failed_gates) or (
            f"item error rate {numbers.pct(summary['item_error_rate'])} is above the gate's "
            f"{numbers.pct(summary['fail_on_item_error_rate'])} (fail_on_item_error_rate)"
        )
    if status == RunStatus.FAILED:
        why = summary.get("error") or "see its summary"
        return f"failed: {why}; `assay resume {summary.get('run_id')}` continues it"
    if status == RunStatus.UNAVAILABLE:
        return "unavailable, nothing ran: " + "; ".join(summary["reasons"])
    return None
