"""A run's target, opened in this process — the driver's, or a Dask worker's
(`assay/orchestrate/worker.py`) — and closed with what its containers left here."""

from __future__ import annotations

import json

from assay.run.plan import RunPlan
from assay.sandbox.hygiene import clean_after
from assay.targets import Target, makes_containers, open_target


def open_plan_target(plan: RunPlan) -> Target:
    """The run's target, opened in this process (the driver's, or a Dask worker's) with the
    preflight snapshot the run recorded."""
    return open_target(
        plan.spec.target,
        concurrency=plan.spec.concurrency,
        seed=plan.spec.seed,
        spec_dir=str(plan.spec_dir),
        run_id=plan.run_id,
        capabilities=json.loads(plan.record["target_snapshot"])
        if plan.record.get("target_snapshot")
        else None,
        store=plan.store,
        redact=plan.spec.redact,
    )


async def close_plan_target(plan: RunPlan, target: Target) -> None:
    """Close the run's target in this process and remove what the run's containers left here."""
    try:
        await target.aclose()
    finally:
        if makes_containers(plan.spec):
            await clean_after(plan.run_id)
