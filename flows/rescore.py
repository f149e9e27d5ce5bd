"""The rescore flow: new scorers over a stored run's outputs, the target never called.

The flow is `assay.orchestrate.rescore.drive_rescore` — the same plain code the terminal runs
embedded, on the same skeleton as a run — hosted by a Prefect flow run (`flows/_host.py`).
"""

from __future__ import annotations

from typing import Any

from prefect import flow
from prefect.client.schemas.objects import State

from assay.flows._host import ending_cleanly, prefect_host
from assay.orchestrate.rescore import drive_rescore


@flow(name="assay-rescore", log_prints=False)
async def rescore_run(
    source_run_id: str,
    spec: str | None = None,
    scorers: list[str] | None = None,
    store: str | None = None,
    run_id: str | None = None,
    resume: bool = False,
    budget: str | None = None,
    concurrency: int | None = None,
    capture_requests: bool | None = None,
    keep_scores: bool = False,
) -> dict[str, Any] | State:
    """Score a stored run again with new scorers and return the rescore's summary. Bad input fails
    the flow run with the message alone (`ending_cleanly`).

    Args:
        source_run_id: the run whose outputs are scored.
        spec: a YAML file whose `scorers` list is used (an eval spec will do).
        scorers: inline scorers instead, each YAML (`{kind: regex, pattern: "\\d"}`) or a bare kind.
        store: the store's root folder; default `ASSAY_STORE` or `./assay-store`.
        run_id: the rescore's id; default a new one (under Prefect: derived from the flow run).
        resume: continue `run_id` with its stored scorers and settings.
        budget: the rescore's own USD budget for its judging (default: the source's).
        concurrency: items scored at once (default: the source's).
        capture_requests: capture the judges' requests and carry the source's forward (default:
            as the source did).
        keep_scores: carry the source's scores forward, of every scorer no new one replaces by
            name, so the rescore compares with its source.
    """
    return await ending_cleanly(
        drive_rescore(
            source_run_id,
            spec,
            scorers,
            store,
            run_id,
            resume,
            budget=budget,
            concurrency=concurrency,
            capture_requests=capture_requests,
            keep_scores=keep_scores,
            host=prefect_host(),
        ),
        title=lambda: f"rescore {source_run_id}",
    )
