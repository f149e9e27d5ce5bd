"""Driving one `assay rescore`: new scorers over a stored run's outputs, the target never called.

The same skeleton as a run (`assay.orchestrate.drive`); `flows/rescore.py` hosts it in the Prefect
flow `assay-rescore`, the terminal's embedded path calls it with the default host (`EMBEDDED`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from assay.orchestrate.drive import EMBEDDED, Host, drive
from assay.run.plan import RunPlan
from assay.run.rescore import RescoreSettings, open_rescore, parse_scorers, rescore_executor
from assay.sandbox.hygiene import clean_after
from assay.store import Store


async def drive_rescore(
    source_run_id: str,
    spec: str | None = None,
    scorers: list[str] | None = None,
    store: str | None = None,
    run_id: str | None = None,
    resume: bool = False,
    *,
    budget: str | None = None,
    concurrency: int | None = None,
    capture_requests: bool | None = None,
    keep_scores: bool = False,
    host: Host = EMBEDDED,
) -> dict[str, Any]:
    """Score a stored run again with new scorers and return the rescore's summary.

    Args:
        source_run_id: the run whose outputs are scored.
        spec: a YAML file whose `scorers` list is used (an eval spec will do).
        scorers: inline scorers instead, each YAML (`{kind: regex, pattern: "\\d"}`) or a bare kind.
        store: the store's root folder; default `ASSAY_STORE` or `./assay-store`.
        run_id: the rescore's id; default `host.default_run_id`, else a new one.
        resume: continue `run_id` with its stored scorers and settings.
        budget: the rescore's own USD budget for its judging (default: the source's).
        concurrency: items scored at once (default: the source's).
        capture_requests: capture the judges' requests and carry the source's forward (default:
            as the source did).
        keep_scores: carry the source's scores forward, of every scorer no new one replaces by
            name, so the rescore compares with its source (`assay rescore --keep-scores`).
        host: what runs this (see `Host`).
    """
    started = time.perf_counter()

    # The new scorers (from the rescore's own record when resuming), then the plan over the source's items.
    spec_path = Path(spec).resolve() if spec else None
    new_scorers = None if resume else parse_scorers(spec_path=spec_path, inline=scorers or [])
    plan, source_rows = open_rescore(
        source_run_id,
        new_scorers,
        store=Store(store),
        spec_dir=spec_path.parent if spec_path else Path.cwd(),
        spec_path=spec_path,
        run_id=run_id or host.default_run_id,
        resume=resume,
        flow_run_id=host.flow_run_id,
        settings=RescoreSettings(budget=budget, concurrency=concurrency, capture_requests=capture_requests),
        keep_scores=keep_scores,
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
        [plan], host=host, started=started, title=f"rescore {source_run_id} · {plan.run_id}", execute=execute
    )
    return summary
