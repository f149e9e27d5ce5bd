"""The commands that run a flow — run, resume, rescore, compare, nightly — embedded, or as a Prefect
flow run when an API is configured or `--prefect` asks (docs/prefect.md).

Embedded, a command calls the plain code the flow wraps, and Prefect is never imported.
Orchestrated, bad input and an unreachable server are found before a flow run exists to fail.
"""

from __future__ import annotations

import _thread
import argparse
import asyncio
import gc
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from assay.cli._output import emit, emit_summary
from assay.cli._parser import EXIT_GATE, EXIT_INPUT, EXIT_OK
from assay.errors import InputError
from assay.flows import prefect_env as _prefect_env
from assay.orchestrate.loop import event_loop_factory
from assay.outcomes import RunKind, RunStatus, Verdict


def _orchestrated(args: argparse.Namespace) -> bool:
    return args.prefect or _prefect_env.api_configured()


def _execute(args: argparse.Namespace, flow: Callable[[bool], Any], check: Any, **params: Any) -> int:
    """Run a flow as a Prefect flow run or embedded (docs/prefect.md), then print its summary.

    Args:
        args: the command line.
        flow: given whether the run is orchestrated, what to run and the model of its request:
            the Prefect flow, or the plain driver it wraps (imported only then: the embedded path
            never imports Prefect); both take the one request.
        check: checks the input before a flow run exists (orchestrated only).
        params: the request's fields.
    """
    from assay.calls.rate import current_share
    from assay.run import progress

    try:  # where the endpoints' rate controllers are shared: checked before anything is written
        current_share()
    except ValueError as exc:
        raise InputError(str(exc)) from None
    orchestrated = _orchestrated(args)
    # Under Prefect the loop is Prefect's; on the embedded path, the one `ASSAY_EVENT_LOOP` names.
    loop_factory = None if orchestrated else event_loop_factory()
    if orchestrated:
        # Bad input and an unreachable server are found here, before a flow run exists to fail.
        check()
        _prefect_env.check_api()
    if not (args.quiet or args.json):
        from assay.cli import _progress  # rich: loaded only when there is something to draw

        progress.install(_progress.progress_bar())
    # SIGTERM (a `kill`, a CI timeout) ends a run like Ctrl-C: finished items kept, the rest cancelled.
    previous = signal.signal(signal.SIGTERM, _as_ctrl_c)
    run, model = flow(orchestrated)
    request = model(store=args.store, **params)
    if args.own_process:
        _tune_gc()
    try:
        with asyncio.Runner(loop_factory=loop_factory) as runner:
            summary = runner.run(_ended(run, request) if orchestrated else run(request))
    finally:
        signal.signal(signal.SIGTERM, previous)
        progress.install(None)
    if summary["status"] == RunStatus.UNAVAILABLE:
        print(
            f"error: the eval is unavailable, nothing ran: {'; '.join(summary['reasons'])}", file=sys.stderr
        )
        if args.json:
            print(json.dumps(summary, default=str, indent=2))
        return EXIT_INPUT
    emit_summary(args, summary)
    # A run stopped early by the circuit breaker is `failed`, with its summary: exit 1 like a gate.
    return EXIT_GATE if summary["status"] in (RunStatus.FAILED_GATE, RunStatus.FAILED) else EXIT_OK


def _as_ctrl_c(signum: int, frame: Any) -> None:
    """SIGTERM delivered as Ctrl-C, which `asyncio.run` turns into a cancellation of the flow at
    its next `await`. Raising KeyboardInterrupt here instead would land at any bytecode — between
    a batch's commit and its bookkeeping, say, so that the batch was committed twice."""
    _thread.interrupt_main(signal.SIGINT)


def _tune_gc() -> None:
    """Garbage collection for a run that has the process to itself (the `assay` command).

    What the imports made lives until the process exits: frozen, collections no longer walk it.
    And a run allocates a dozen objects an item, almost none of them in cycles: collecting the
    young generation every 10,000 allocations instead of every 700 cuts the collector's CPU
    (benchmarks/throughput.py, docs/performance.md).
    """
    gc.freeze()
    gc.set_threshold(10_000, 20, 10)


async def _ended(flow: Any, request: Any) -> Any:
    """What a flow run of `flow` returned: a run that failed fails its flow run, whose state still
    carries the summary (`assay.tasks.flow_result`)."""
    from assay.tasks import flow_result

    return await flow_result(await flow(request, return_state=True))


def _run_flow(orchestrated: bool) -> tuple[Any, type]:
    """`assay-run` under Prefect, else the plain driver it wraps (no Prefect imported)."""
    from assay.orchestrate.run import RunRequest, drive_run

    if orchestrated:
        from assay.flows.run import run_eval

        return run_eval, RunRequest
    return drive_run, RunRequest


def _rescore_flow(orchestrated: bool) -> tuple[Any, type]:
    """`assay-rescore` under Prefect, else the plain driver it wraps (no Prefect imported)."""
    from assay.orchestrate.rescore import RescoreRequest, drive_rescore

    if orchestrated:
        from assay.flows.rescore import rescore_run

        return rescore_run, RescoreRequest
    return drive_rescore, RescoreRequest


def _dask(args: argparse.Namespace) -> dict[str, str]:
    """The `dask` parameter: `--dask`, else `ASSAY_DASK` (the driver checks that a scheduler
    answers there before anything is written)."""
    from assay.settings import settings

    address = args.dask or settings().dask
    return {"dask": address} if address else {}


def run(args: argparse.Namespace) -> int:
    """`assay run SPEC`."""
    from assay.run.checks import validate

    compare = {"compare_to": args.compare_to} if args.compare_to else {}
    keys = {"check_keys": True} if args.check_keys else {}
    dask = _dask(args)
    return _execute(
        args, _run_flow, lambda: validate(Path(args.spec)), spec=args.spec, **compare, **keys, **dask
    )


def rescore(args: argparse.Namespace) -> int:
    """`assay rescore RUN_ID --scorer ... | --spec FILE`."""
    from assay.cli._runs import resolve_run
    from assay.run.rescore import parse_scorers
    from assay.store import Store

    store = Store(args.store)
    source_run_id = resolve_run(store, args.source_run_id)

    def check() -> None:
        store.read_run(source_run_id)
        parse_scorers(spec_path=Path(args.spec) if args.spec else None, inline=args.scorer)

    return _execute(
        args,
        _rescore_flow,
        check,
        source_run_id=source_run_id,
        spec=args.spec,
        scorers=args.scorer or None,
        budget=args.budget,
        concurrency=args.concurrency,
        capture_requests=args.capture_requests,
        **({"keep_scores": True} if args.keep_scores else {}),
    )


def resume(args: argparse.Namespace) -> int:
    """`assay resume RUN_ID`: a run, or a rescore, finished with the spec it started with."""
    from assay.cli._runs import resolve_run
    from assay.run.checks import validate
    from assay.run.plan import failure_selector, spec_for_resume
    from assay.store import Store

    store = Store(args.store)
    run_id = resolve_run(store, args.run_id)
    record = store.read_run(run_id)
    if record["kind"] == RunKind.RESCORE and args.retry_failed is not None:
        raise InputError("--retry-failed: a rescore calls no target; resume its source run instead")
    if record["kind"] == RunKind.RESCORE and args.check_keys:
        raise InputError("--check-keys: a rescore calls no target, so it uses no provider key")
    if record["kind"] == RunKind.RESCORE:
        return _execute(
            args,
            _rescore_flow,
            lambda: None,
            source_run_id=record["source_run_id"],
            spec=record["spec_path"],
            run_id=run_id,
            resume=True,
        )
    spec = spec_for_resume(record)
    retry = (
        None if args.retry_failed is None else [k.strip() for k in args.retry_failed.split(",") if k.strip()]
    )
    if retry is not None:
        failure_selector(retry)  # a word that is no failure kind: exit 2 before anything runs
    return _execute(
        args,
        _run_flow,
        lambda: validate(spec),
        spec=str(spec),
        run_id=run_id,
        resume=True,
        cell=record["cell"],
        **({"retry_failed": retry} if retry is not None else {}),
        **({"check_keys": True} if args.check_keys else {}),
        **_dask(args),
    )


def compare(args: argparse.Namespace) -> int:
    """`assay compare BASE... --candidate CAND...`: exit 1 when a gate fails."""
    from pydantic import ValidationError

    from assay.analysis.compare import CompareOptions, load_sides
    from assay.errors import SpecError
    from assay.spec import describe_errors
    from assay.store import Store

    thresholds = {}
    for text in args.threshold:
        name, _, value = text.partition("=")
        try:
            thresholds[name] = float(value)
        except ValueError:
            raise SpecError(f"--threshold {text!r}: expected NAME=NUMBER") from None
    try:
        options = CompareOptions(
            thresholds=thresholds,
            max_item_error_rate=args.max_item_error_rate,
            max_scorer_error_rate=args.max_scorer_error_rate,
            fail_on=args.fail_on or [Verdict.REGRESSED.value],
            cluster=args.cluster,
            resamples=args.resamples,
            seed=args.seed,
            adjust=args.adjust,
            labels=args.labels,
        )
    except ValidationError as exc:
        raise SpecError(describe_errors(exc)) from None
    from assay.cli._runs import resolve_run
    from assay.orchestrate.compare import CompareRequest, compare_and_store

    store = Store(args.store)
    request = CompareRequest(
        baseline=[resolve_run(store, run, name=args.name) for run in args.baseline],
        candidate=[resolve_run(store, run, name=args.name) for run in args.candidate],
        store=args.store,
        options=options,
    )
    if _orchestrated(args):
        load_sides(store, request.baseline, request.candidate)
        _prefect_env.check_api()
        from assay.flows.compare import compare_runs
        from assay.tasks import flow_result

        comparison = asyncio.run(flow_result(compare_runs(request, return_state=True)))
    else:
        comparison = compare_and_store(request)  # the flow's body, without Prefect
    emit(args, comparison, "print_comparison")
    return EXIT_OK if comparison["passed"] else EXIT_GATE


def nightly(args: argparse.Namespace) -> int:
    """`assay nightly SPEC...`: run, compare with the last good night, prune; exit 1 on a failed gate."""
    from assay.cli._runs import run_facts
    from assay.orchestrate.nightly import NightlyRequest, drive_nightly
    from assay.run.checks import validate
    from assay.store import Store

    if args.retention < 1:
        raise InputError(f"--retention {args.retention}: keep at least 1 run")
    for spec in args.specs:
        validate(Path(spec))
    request = NightlyRequest(specs=args.specs, store=args.store, retention=args.retention)
    if _orchestrated(args):
        _prefect_env.check_api()
        from assay.flows.nightly import nightly as nightly_flow

        report = asyncio.run(_ended(nightly_flow, request))
    else:  # the plain driver: no Prefect imported
        with asyncio.Runner(loop_factory=event_loop_factory()) as runner:
            report = runner.run(drive_nightly(request))
    # Each night's run and its baseline named with their model (and cell, tags), not by id alone.
    named = [run_id for spec in report["specs"] for run_id in (spec.get("run_id"), spec.get("baseline"))]
    report["runs"] = run_facts(Store(args.store), named)
    emit(args, report, "print_nightly")
    return EXIT_OK if report["passed"] else EXIT_GATE
