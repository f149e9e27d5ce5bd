"""The commands that read the store or tidy up: show, ls, report, estimate, power, leaderboard,
requests, clean, ui. Each imports what it needs when it runs, so `assay ls` loads no HTTP client
and `assay run` no report."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from assay.cli._output import emit, emit_summary
from assay.cli._parser import EXIT_GATE, EXIT_INPUT, EXIT_OK
from assay.outcomes import RunStatus

_LISTED = (
    "run_id",
    "name",
    "model",
    "kind",
    "source_run_id",
    "cell",
    "tags",
    "status",
    "created_at",
    "n_planned",
    "n_completed",
    "n_failed",
)


def show(args: argparse.Namespace) -> int:
    """`assay show RUN_ID`: the run's summary; exit 1 when its gate failed."""
    from assay.analysis.summary import summarise
    from assay.cli._runs import resolve_run
    from assay.store import Store

    store = Store(args.store)
    run_id = resolve_run(store, args.run_id, name=args.name)
    summary = summarise(store, run_id)
    if "cells" not in summary and (
        store.location.names(f"labels/run_id={run_id}") or summary.get("source_run_id")
    ):
        from assay.analysis.judge_trust import labelled_means, nan_to_none

        if labelled := labelled_means(store, run_id):
            summary["labels"] = nan_to_none(labelled)
    if "cells" not in summary:
        from assay.analysis.judge_noise import noise_floor

        if noise := noise_floor(store.scan_run(run_id, "scores")):
            summary["judge_noise"] = noise
    emit_summary(args, summary)
    return EXIT_GATE if summary["status"] == RunStatus.FAILED_GATE else EXIT_OK


def ls(args: argparse.Namespace) -> int:
    """`assay ls`: the most recent runs."""
    from assay.store import Store

    runs = (
        Store(args.store)
        .runs()
        .select(*_LISTED)
        .sort("created_at", descending=True)
        .head(args.limit)
        .collect()
    )
    emit(args, runs.to_dicts(), "print_runs", drawn=runs)
    return EXIT_OK


def report(args: argparse.Namespace) -> int:
    """`assay report RUN_ID`: writes the HTML report, prints its path."""
    from assay.cli._runs import resolve_run
    from assay.report import write_report
    from assay.store import Store

    store = Store(args.store)
    baseline = resolve_run(store, args.baseline) if args.baseline else None
    path = write_report(store, resolve_run(store, args.run_id), baseline=baseline, out=args.out)
    print(json.dumps({"path": str(path)}) if args.json else path)
    return EXIT_OK


def estimate(args: argparse.Namespace) -> int:
    """`assay estimate SPEC`: the calls, tokens and cost a run of the spec will take."""
    from assay.analysis.estimate import estimate as estimate_spec
    from assay.store import Store

    emit(args, estimate_spec(args.spec, store=Store(args.store)), "print_estimate")
    return EXIT_OK


def power(args: argparse.Namespace) -> int:
    """`assay power RUN_ID --mde D`: the items a comparison needs; with `--labels --scorer S
    --width W`, the labels a corrected mean needs."""
    from assay.analysis.compare import power_report
    from assay.cli._runs import resolve_run
    from assay.errors import InputError
    from assay.store import Store

    if args.labels:
        if args.scorer is None or args.width is None:
            raise InputError("power --labels needs --scorer and --width")
        from assay.analysis.judge_trust import labels_power

        store = Store(args.store)
        emit(
            args,
            labels_power(store, resolve_run(store, args.run_id), args.scorer, args.width),
            "print_labels_power",
        )
        return EXIT_OK
    if args.mde is None:
        raise InputError(
            "power needs --mde (items for a comparison) or --labels (labels for a corrected mean)"
        )
    store = Store(args.store)
    emit(
        args, power_report(store, resolve_run(store, args.run_id), args.mde, power=args.power), "print_power"
    )
    return EXIT_OK


def leaderboard(args: argparse.Namespace) -> int:
    """`assay leaderboard MATRIX_ID`: a matrix run's cells ranked per scorer."""
    from assay.analysis.compare import CompareOptions
    from assay.analysis.leaderboard import build_leaderboard
    from assay.store import Store

    options = CompareOptions(adjust=args.adjust)
    board = build_leaderboard(Store(args.store), args.matrix_id, baseline_cell=args.baseline, options=options)
    emit(args, board, "print_leaderboard")
    return EXIT_OK


def requests(args: argparse.Namespace) -> int:
    """`assay requests export RUN_ID` (JSONL on stdout) and `assay requests validate FILE`."""
    from assay.calls.capture import stored_records
    from assay.calls.request_codec import validate_jsonl, write_jsonl
    from assay.store import Store

    if args.requests_command == "export":
        from assay.cli._runs import resolve_run

        store = Store(args.store)
        run_id = resolve_run(store, args.run_id)
        store.read_run(run_id)
        records = stored_records(store.run_requests(run_id).to_dicts())
        write_jsonl(records, sys.stdout, v1=args.format == "v1")
        return EXIT_OK
    count, problem = validate_jsonl(Path(args.file))
    if problem is not None:
        print(f"error: {args.file}: {problem}", file=sys.stderr)
        return EXIT_INPUT
    print(f"{args.file}: {count} valid records")
    return EXIT_OK


def trajectories(args: argparse.Namespace) -> int:
    """`assay trajectories export RUN_ID`: each current item x trial's trajectory as an ATIF
    document, one a line on stdout; exit 2 when no item kept one."""
    from assay.cli._runs import resolve_run
    from assay.run.trajectories import run_trajectories
    from assay.store import Store

    store = Store(args.store)
    for trajectory in run_trajectories(store, resolve_run(store, args.run_id)):
        sys.stdout.write(json.dumps(trajectory.document(), ensure_ascii=False) + "\n")
    return EXIT_OK


def clean(args: argparse.Namespace) -> int:
    """`assay clean RUN_ID... | --all`: the Docker containers and networks runs left behind."""
    import docker.errors

    from assay.sandbox import clean as clean_run

    if bool(args.run_ids) == args.all:
        print("error: name runs to clean, or --all (not both)", file=sys.stderr)
        return EXIT_INPUT
    try:
        removed = [clean_run(None)] if args.all else [clean_run(run_id) for run_id in args.run_ids]
    except docker.errors.DockerException as exc:
        print(f"error: the Docker engine did not answer: {exc}", file=sys.stderr)
        return EXIT_INPUT
    containers = sum(r.containers for r in removed)
    networks = sum(r.networks for r in removed)
    if args.json:
        print(json.dumps({"containers": containers, "networks": networks}))
    elif not args.quiet:
        print(f"removed {containers} containers and {networks} networks")
    return EXIT_OK


def ui(args: argparse.Namespace) -> int:
    """`assay ui`: a local Prefect server, every deployment and a worker, until Ctrl-C."""
    from assay.flows.ui import serve

    return serve(
        port=args.port, home=Path(args.home) if args.home else None, log_dir=Path(args.logs), store=args.store
    )
