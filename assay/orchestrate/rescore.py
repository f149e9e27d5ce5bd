"""Driving one `assay rescore`: new scorers over a stored run's outputs, the target never called.

The same skeleton as a run (`assay.orchestrate.drive`); `flows/rescore.py` hosts it in the Prefect
flow `assay-rescore`, the terminal's embedded path calls it with the default host (`EMBEDDED`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from assay.orchestrate.drive import EMBEDDED, Host, drive
from assay.run.plan import RunPlan
from assay.run.rescore import RescoreSettings, open_rescore, parse_scorers, rescore_executor
from assay.sandbox.hygiene import clean_after
from assay.store import Store


class RescoreRequest(BaseModel):
    """What to rescore: the parameters of `drive_rescore`, and of the Prefect flow `assay-rescore`
    (its deployment form in the UI shows these fields)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    source_run_id: str
    """The run whose outputs are scored."""
    spec: str | None = None
    """A YAML file whose `scorers` list is used (an eval spec will do)."""
    scorers: list[str] | None = None
    """Inline scorers instead, each YAML (`{kind: regex, pattern: "\\d"}`) or a bare kind."""
    store: str | None = None
    """The store: a folder or `s3://bucket/prefix`; default `ASSAY_STORE`, else `./assay-store`."""
    run_id: str | None = None
    """The rescore's id; default a new one (under Prefect: derived from the flow run)."""
    resume: bool = False
    """Continue `run_id` with its stored scorers and settings."""
    budget: str | None = None
    """The rescore's own USD budget for its judging (default: the source's)."""
    concurrency: int | None = None
    """Items scored at once (default: the source's)."""
    capture_requests: bool | None = None
    """Capture the judges' requests and carry the source's forward (default: as the source did)."""
    keep_scores: bool = False
    """Carry the source's scores forward, of every scorer no new one replaces by name, so the
    rescore compares with its source (`assay rescore --keep-scores`)."""


async def drive_rescore(request: RescoreRequest, *, host: Host = EMBEDDED) -> dict[str, Any]:
    """Score a stored run again with new scorers and return the rescore's summary.

    Args:
        request: what to rescore.
        host: what runs this (see `Host`); its `default_run_id` is the id when none is given.
    """
    started = time.perf_counter()

    # The new scorers (from the rescore's own record when resuming), then the plan over the source's items.
    spec_path = Path(request.spec).resolve() if request.spec else None
    new_scorers = None if request.resume else parse_scorers(spec_path=spec_path, inline=request.scorers or [])
    plan, source_rows = open_rescore(
        request.source_run_id,
        new_scorers,
        store=Store(request.store),
        spec_dir=spec_path.parent if spec_path else Path.cwd(),
        spec_path=spec_path,
        run_id=request.run_id or host.default_run_id,
        resume=request.resume,
        flow_run_id=host.flow_run_id,
        settings=RescoreSettings(
            budget=request.budget, concurrency=request.concurrency, capture_requests=request.capture_requests
        ),
        keep_scores=request.keep_scores,
    )

    # Score every completed source item in shards; failed ones pass through unscored.
    async def execute(plan: RunPlan, host: Host) -> None:
        try:
            await host.run_shards(rescore_executor(plan, source_rows))
        finally:
            if any(scorer.makes_containers for scorer in plan.spec.scorers):
                await clean_after(plan.run_id)  # a cancelled scorer's fresh sandbox

    # Summarise, apply the item-error-rate gate (carried from the source), record the status.
    (summary,) = await drive(
        [plan],
        host=host,
        started=started,
        title=f"rescore {request.source_run_id} · {plan.run_id}",
        execute=execute,
    )
    return summary
