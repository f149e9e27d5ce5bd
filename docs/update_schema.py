"""Rewrite the tables of docs/schema.md: the columns from `assay/_schema/`, the enums from
`assay/outcomes.py` (run after changing either).

    .venv/bin/python docs/update_schema.py

tests/house/test_vocabulary.py fails while the doc and the code disagree; this keeps the prose and replaces
the tables.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from assay import _schema, outcomes

DOC = Path(__file__).with_name("schema.md")
SECTIONS = {
    "runs": ("RUNS", "run_id", "the run's id (the hive partition key, `run_id=<id>` in the path)"),
    "items": ("ITEMS", "run_id", "the run's id (the hive partition key, `run_id=<id>` in the path)"),
    "scores": ("SCORES", "run_id", "the run's id (the hive partition key, `run_id=<id>` in the path)"),
    "requests": ("REQUESTS", "run_id", "the run's id (the hive partition key, `run_id=<id>` in the path)"),
    "turns": ("TURNS", "run_id", "the run's id (the hive partition key, `run_id=<id>` in the path)"),
    "batches": ("BATCHES", "run_id", "the run's id (the hive partition key, `run_id=<id>` in the path)"),
    "comparisons": ("COMPARISONS", "comparison_id", "the comparison's id (the hive partition key)"),
    "leaderboards": ("LEADERBOARDS", "matrix_id", "the matrix's id (the hive partition key)"),
    "labels": (
        "LABELS",
        "run_id",
        "the labelled run's id (the hive partition key, `run_id=<id>` in the path)",
    ),
}


# Every StrEnum of assay/outcomes.py, named and placed (a test checks that none is missing).
ENUMS: list[tuple[type[StrEnum], str]] = [
    (outcomes.ItemOutcome, "item outcome (`items.outcome`)"),
    (outcomes.ScorerOutcome, "scorer outcome (`scores.outcome`)"),
    (outcomes.RowKind, "row kind (`scores.kind`)"),
    (outcomes.Gauge, "gauge (`scores.scorer` where `kind = 'gauge'`)"),
    (outcomes.RunKind, "run kind (`runs.kind`)"),
    (outcomes.Verdict, "verdict (`comparisons.verdict`)"),
    (outcomes.RunStatus, "run status (`runs.status`)"),
    (outcomes.Completeness, "cost completeness (`*.cost_completeness`)"),
    (outcomes.CostReason, "cost reason (`*.cost_reasons` keys)"),
    (outcomes.SpendKind, "spend kind (`operations_by_kind`, `cost_<kind>_usd`, `requests.kind`)"),
    (outcomes.TokenKind, "token kind (`tokens_<kind>`)"),
    (outcomes.FailureKind, "failure kind (`items.failure_kind`, `turns.failure_kind`)"),
    (
        outcomes.FinishReason,
        "finish reason (`items.finish_reason`, `turns.finish_reason`, `requests.finish_reason`)",
    ),
    (outcomes.TurnMethod, "turn method (`turns.method`)"),
    (outcomes.BudgetStatus, "budget status (`runs.budget_status`)"),
    (outcomes.BudgetClosedBy, "budget closed by (`runs.budget_closed_by`)"),
    (outcomes.CaptureStatus, "capture status (`runs.capture_status`)"),
    (outcomes.RequestPhase, "request phase (`requests.phase`)"),
    (outcomes.RequestOutcome, "request outcome (`requests.outcome`)"),
    (outcomes.BatchState, "batch state (`batches.state`)"),
    (
        outcomes.TrajectoryStatus,
        "trajectory status (`trajectory_status` in an http_agent's `items.caller_metadata`)",
    ),
    (outcomes.Gate, "gate (`gate` in `comparison.json`)"),
    (outcomes.IntervalMethod, "interval method (`comparisons.ci_method`, `leaderboards.ci_method`)"),
    (outcomes.Adjustment, "multiplicity adjustment (`comparisons.adjustment`, `leaderboards.adjustment`)"),
]


def enum_table() -> str:
    rows = ["| enum | values |", "|---|---|"]
    for enum, label in ENUMS:
        rows.append(f"| {label} | {', '.join(f'`{member.value}`' for member in enum)} |")
    return "\n".join(rows)


def _replace_table(doc: str, head: str, header: str, new: str) -> str:
    """`doc` with the table that starts with `header` after `head` replaced by `new`."""
    start = doc.index(header, doc.index(head))
    lines = doc[start:].split("\n")
    n = next(i for i, line in enumerate(lines) if not line.startswith("|"))
    return doc[:start] + new + doc[start + len("\n".join(lines[:n])) :]


def table(schema_name: str, key: str, meaning: str) -> str:
    rows = ["| column | type | meaning |", "|---|---|---|", f"| `{key}` | `string` | {meaning} |"]
    for field in getattr(_schema, schema_name):
        text = field.metadata[b"description"].decode().replace("|", "\\|")
        rows.append(f"| `{field.name}` | `{field.type}` | {text} |")
    return "\n".join(rows)


def updated(doc: str) -> str:
    """The doc with its tables made from the code."""
    doc = _replace_table(doc, "\n## Outcomes and other enums\n", "| enum | values |", enum_table())
    for section, (schema_name, key, meaning) in SECTIONS.items():
        head = f"\n## {section}\n"
        if head not in doc:
            doc += f"{head}\n{table(schema_name, key, meaning)}\n"
            continue
        doc = _replace_table(doc, head, "| column | type | meaning |", table(schema_name, key, meaning))
    return doc


def main() -> None:
    DOC.write_text(updated(DOC.read_text()))


if __name__ == "__main__":
    main()
