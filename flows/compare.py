"""The compare flow: baseline vs candidate runs, paired statistics, verdicts and gates."""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State
from prefect.states import Failed

from assay.orchestrate.compare import CompareRequest, compare_and_store
from assay.tasks import current_flow_run
from assay.tasks.publish import log_line, name_flow_run, publish_comparison


@flow(name="assay-compare", log_prints=False)
def compare_runs(request: CompareRequest) -> dict[str, Any] | State:
    """Compare candidate runs with baseline runs of the same dataset; returns the comparison.

    Args:
        request: what to compare: the baseline's and the candidate's runs, the store, the options.
    """
    # Read both sides, compare them per scorer, gate, and store the comparison beside the runs.
    comparison = compare_and_store(request)

    # Show it in the Prefect UI: the flow run's name, its logs, an artifact.
    name_flow_run(f"compare {'+'.join(request.baseline)} → {'+'.join(request.candidate)}")
    for line in [f"comparison {comparison['comparison_id']}", *comparison["lines"]]:
        log_line(line)
    for message in comparison["failed_gates"]:
        log_line(f"gate failed: {message}")
    publish_comparison(comparison)

    # Under Prefect a failed gate fails the flow run, so schedules and automations see it.
    if not comparison["passed"] and current_flow_run() is not None:
        return Failed(message="; ".join(comparison["failed_gates"]), data=comparison)
    return comparison
