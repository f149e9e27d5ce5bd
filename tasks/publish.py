"""What a flow shows in the Prefect UI: a meaningful flow-run name, log lines and artifacts.

Every function here does nothing outside a Prefect flow run (the embedded path has no UI).
"""

from __future__ import annotations

from typing import Any

from prefect.artifacts import acreate_table_artifact, create_markdown_artifact
from prefect.client.orchestration import get_client
from prefect.logging import get_run_logger

from assay import numbers
from assay.analysis.lines import comparison_markdown
from assay.analysis.monitor import compare_line
from assay.links import view_compare, view_run
from assay.outcomes import RowKind
from assay.tasks import current_flow_run


def name_flow_run(name: str) -> None:
    """Rename the current flow run, e.g. `quickstart-arithmetic · 20261129T102824-dcedf3`."""
    flow_run = current_flow_run()
    if flow_run is not None:
        with get_client(sync_client=True) as client:
            client.update_flow_run(flow_run.id, name=name)


def log_line(line: str) -> None:
    """Log `line` at INFO to the current flow run (the Logs tab); nothing outside a flow run."""
    if current_flow_run() is not None:
        get_run_logger().info(line)


def _key(text: str) -> str:
    # Artifact keys: lowercase letters, digits and dashes only.
    return "".join(c if c.isalnum() else "-" for c in text.lower()).strip("-")[:100]


async def publish_run_summary(summary: dict[str, Any]) -> None:
    """The run's summary as a table artifact: one row per scorer, then one per gauge (its `scored`
    is how many items measured it), with the item outcomes and the cost. Figures are written as
    the terminal and the report write them (`assay.numbers`)."""
    if current_flow_run() is None:
        return
    counts = ", ".join(f"{n} {outcome}" for outcome, n in summary["items"].items() if n)
    rows = [
        {
            "kind": RowKind.SCORE.value,
            "scorer": row["scorer"],
            "mean": numbers.num(row["mean"]),
            "p50": numbers.num(row["p50"]),
            "p95": numbers.num(row["p95"]),
            "scored": row["scored"],
            "failed": row["failed"],
            "skipped": row["skipped"],
        }
        for row in summary["scorers"]
    ] + [
        {
            "kind": RowKind.GAUGE.value,
            "scorer": row["gauge"],
            "mean": numbers.gauge(row["gauge"], row["mean"]),
            "p50": numbers.gauge(row["gauge"], row["p50"]),
            "p95": numbers.gauge(row["gauge"], row["p95"]),
            "scored": row["n"],
            "failed": None,
            "skipped": None,
        }
        for row in summary.get("gauges", [])
    ]
    await acreate_table_artifact(
        rows or [{"scorer": "(none)"}],
        key=_key(f"assay-run-{summary['name']}"),
        description=(
            f"Run {summary['run_id']} of {summary['name']}: {summary['status']}; items {counts}; "
            f"item error rate {numbers.pct(summary['item_error_rate'])}; {numbers.cost_line(summary['cost'])}"
            + (f". {why}" if (why := compare_line(summary)) else "")
            + (f". [Open it in assay view]({url})" if (url := view_run(summary["run_id"])) else "")
        ),
    )


def publish_comparison(comparison: dict[str, Any]) -> None:
    """The comparison as a markdown artifact (sync: the compare flow is sync)."""
    if current_flow_run() is None:
        return
    # The view's compare page lines up one run with one; a comparison of pooled runs has no page.
    sides = (comparison["baseline"], comparison["candidate"])
    url = view_compare(sides[0][0], sides[1][0]) if all(len(side) == 1 for side in sides) else None
    create_markdown_artifact(
        comparison_markdown(comparison) + (f"\n\n[Triage it in assay view]({url})\n" if url else ""),
        key=_key(f"assay-compare-{comparison['comparison_id']}"),
        description=comparison["lines"][0] if comparison["lines"] else "comparison",
    )
