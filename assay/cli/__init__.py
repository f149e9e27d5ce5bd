"""The `assay` command: run, resume, show and list evals from a terminal.

Exit status: 0 ok, 1 a gate failed (or a crash: the run is recorded as failed), 2 bad input (spec,
dataset, flag, unknown run), 3 another process took over the run this one was driving, 130
interrupted (Ctrl-C or SIGTERM).
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

from assay.errors import InputError, LeaseLostError
from assay.orchestrate import prefect_env as _prefect_env
from assay.outcomes import RunStatus, Verdict

EXIT_OK, EXIT_GATE, EXIT_INPUT, EXIT_LOST, EXIT_INTERRUPTED = 0, 1, 2, 3, 130


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep its message short
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"error: {message}\n")


def _parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--store", help="store root (default: $ASSAY_STORE or ./assay-store)")
    common.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    common.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no table")
    common.add_argument("-v", "--verbose", action="store_true", help="show Prefect's logs")
    parser = _ArgumentParser(prog="assay", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_ArgumentParser)

    run = commands.add_parser("run", parents=[common], help="run an eval spec")
    run.add_argument("spec", help="the eval spec (YAML)")
    run.add_argument(
        "--prefect", action="store_true", help="run as a Prefect flow run even without PREFECT_API_URL"
    )
    run.add_argument(
        "--check-keys",
        action="store_true",
        help="try each agent's provider key with one cheap request before any container starts",
    )
    estimate = commands.add_parser(
        "estimate", parents=[common], help="calls, tokens and cost a spec will take"
    )
    estimate.add_argument("spec")
    resume = commands.add_parser("resume", parents=[common], help="finish an interrupted run")
    resume.add_argument("run_id")
    resume.add_argument(
        "--retry-failed",
        nargs="?",
        const="",
        metavar="KINDS",
        help="also run failed items again (only these failure kinds, comma-separated: http, timeout, "
        "connection, protocol, exception, rate_limit); each failed row is kept as history",
    )
    resume.add_argument(
        "--prefect", action="store_true", help="run as a Prefect flow run even without PREFECT_API_URL"
    )
    rescore = commands.add_parser(
        "rescore", parents=[common], help="score a stored run again with new scorers"
    )
    rescore.add_argument("source_run_id")
    rescore.add_argument("--spec", help="a YAML file whose `scorers` list is used (an eval spec will do)")
    rescore.add_argument(
        "--scorer", action="append", default=[], help="an inline scorer, YAML or a bare kind (repeatable)"
    )
    rescore.add_argument("--budget", help="the rescore's own USD budget for its judging (default: the source's)")
    rescore.add_argument("--concurrency", type=int, help="items scored at once (default: the source's)")
    rescore.add_argument(
        "--capture-requests",
        action=argparse.BooleanOptionalAction,
        help="capture the judges' requests and carry the source's forward (default: as the source did)",
    )
    rescore.add_argument(
        "--prefect", action="store_true", help="run as a Prefect flow run even without PREFECT_API_URL"
    )
    compare = commands.add_parser(
        "compare", parents=[common], help="compare candidate runs with baseline runs"
    )
    compare.add_argument("baseline", nargs="+", help="baseline run id(s); several are averaged per item")
    compare.add_argument("--candidate", nargs="+", required=True, help="candidate run id(s)")
    compare.add_argument(
        "--threshold", action="append", default=[], metavar="NAME=VALUE", help="a scorer's verdict threshold"
    )
    compare.add_argument(
        "--max-item-error-rate", type=float, default=0.05, help="per run; 1 disables (default 0.05)"
    )
    compare.add_argument(
        "--max-scorer-error-rate", type=float, default=0.05, help="per side and scorer (default 0.05)"
    )
    compare.add_argument(
        "--fail-on",
        action="append",
        choices=[Verdict.REGRESSED.value, Verdict.INCONCLUSIVE.value],
        help="verdicts that fail (default regressed)",
    )
    compare.add_argument("--cluster", help="the annotation naming each item's cluster (default: `cluster`)")
    compare.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    compare.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    compare.add_argument(
        "--prefect", action="store_true", help="run as a Prefect flow run even without PREFECT_API_URL"
    )
    power = commands.add_parser(
        "power", parents=[common], help="items a comparison needs to detect a difference"
    )
    power.add_argument("run_id")
    power.add_argument("--mde", type=float, required=True, help="minimum detectable difference, e.g. 0.02")
    power.add_argument("--power", type=float, default=0.8, help="chance of detecting it (default 0.8)")
    nightly = commands.add_parser(
        "nightly", parents=[common], help="the nightly benchmark: run, compare, prune"
    )
    nightly.add_argument("specs", nargs="+", help="eval specs")
    nightly.add_argument("--retention", type=int, default=30, help="nightly runs kept per spec (default 30)")
    nightly.add_argument(
        "--prefect", action="store_true", help="run as a Prefect flow run even without PREFECT_API_URL"
    )
    leaderboard = commands.add_parser("leaderboard", parents=[common], help="rank the cells of a matrix run")
    leaderboard.add_argument("matrix_id")
    leaderboard.add_argument("--baseline", help="the cell the others are compared with (default: the first)")
    requests = commands.add_parser("requests", help="the captured model calls (the request sidecar)")
    requests_commands = requests.add_subparsers(
        dest="requests_command", required=True, parser_class=_ArgumentParser
    )
    export = requests_commands.add_parser(
        "export", parents=[common], help="a run's records as JSONL on stdout"
    )
    export.add_argument("run_id")
    export.add_argument(
        "--format",
        choices=["assay", "v1"],
        default="assay",
        help="field names: Assay's (default) or the seed's request sidecar v1 (operationId, …)",
    )
    check = requests_commands.add_parser("validate", parents=[common], help="check a JSONL file of records")
    check.add_argument("file")
    report = commands.add_parser(
        "report", parents=[common], help="a self-contained HTML report of a run (works offline)"
    )
    report.add_argument("run_id")
    report.add_argument("--baseline", help="a run of the same dataset to compare with")
    report.add_argument("--out", help="the HTML file (default: <store>/reports/<run_id>.html)")
    clean = commands.add_parser(
        "clean", parents=[common], help="remove the Docker containers and networks runs left behind"
    )
    clean.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="these runs' (default: with --all)")
    clean.add_argument("--all", action="store_true", help="every run's")
    show = commands.add_parser("show", parents=[common], help="a run's summary")
    show.add_argument("run_id")
    ui = commands.add_parser(
        "ui", help="a local Prefect server, every deployment and a worker (Ctrl-C stops)"
    )
    ui.add_argument("--port", type=int, default=4200, help="the server's port on 127.0.0.1 (default 4200)")
    ui.add_argument("--home", help="PREFECT_HOME for the server and worker (default: Prefect's own)")
    ui.add_argument(
        "--logs", default=".assay-ui", help="where the server's and worker's logs go (default .assay-ui)"
    )
    ui.add_argument("-v", "--verbose", action="store_true", help="show Prefect's logs")
    ls = commands.add_parser("ls", parents=[common], help="recent runs")
    ls.add_argument("-n", "--limit", type=int, default=20, help="how many runs (default 20)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """The `assay` command.

    Args:
        argv: the arguments; None reads the process's own, and means this is the `assay` process,
            which exits next.
    """
    try:
        return _main(argv)
    finally:
        if argv is None:
            # The interpreter's last garbage collections walk every object the imports made
            # (Polars, PyArrow, pydantic models): ~1 s of a short run's exit here. Frozen, they are
            # skipped; the memory goes back to the OS all the same.
            gc.freeze()


def _main(argv: list[str] | None) -> int:
    args = _parser().parse_args(argv)
    args.own_process = argv is None
    _prefect_env.configure(verbose=args.verbose)
    try:
        return _COMMANDS[args.command](args)
    except InputError as exc:
        head = f"error: {exc.source}" if exc.source else "error"
        if len(exc.problems) == 1:
            print(f"{head}: {exc.problems[0]}", file=sys.stderr)
        else:
            print(f"{head}: {len(exc.problems)} problems", file=sys.stderr)
            for problem in exc.problems:
                print(f"  - {problem}", file=sys.stderr)
        return EXIT_INPUT
    except LeaseLostError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_LOST
    except KeyboardInterrupt:
        print("interrupted: finished items are stored; `assay resume RUN_ID` continues", file=sys.stderr)
        return EXIT_INTERRUPTED


def _execute(args: argparse.Namespace, flow: Callable[[bool], Any], check: Any, **params: Any) -> int:
    """Run a flow as a Prefect flow run or embedded (docs/prefect.md), then print its summary.

    Args:
        args: the command line.
        flow: given whether the run is orchestrated, what to run: the Prefect flow, or the plain
            code it wraps (imported only then: the embedded path never imports Prefect).
        check: checks the input before a flow run exists (orchestrated only).
        params: the flow's parameters.
    """
    from assay.run import progress

    orchestrated = args.prefect or _prefect_env.api_configured()
    if orchestrated:
        # Bad input and an unreachable server are found here, before a flow run exists to fail.
        check()
        _prefect_env.check_api()
    if not (args.quiet or args.json):
        from assay.cli import _terminal  # rich: loaded only when there is something to draw

        progress.install(_terminal.progress_bar())
    # SIGTERM (a `kill`, a CI timeout) ends a run like Ctrl-C: finished items kept, the rest cancelled.
    previous = signal.signal(signal.SIGTERM, _as_ctrl_c)
    run = flow(orchestrated)
    if args.own_process:
        _tune_gc()
    try:
        summary = asyncio.run(run(store=args.store, **params))
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
    _print_summary(args, summary)
    return EXIT_GATE if summary["status"] == RunStatus.FAILED_GATE else EXIT_OK


def _as_ctrl_c(signum: int, frame: Any) -> None:
    """SIGTERM delivered as Ctrl-C, which `asyncio.run` turns into a cancellation of the flow at
    its next `await`. Raising KeyboardInterrupt here instead would land at any bytecode — between
    a batch's commit and its bookkeeping, say, so that the batch was committed twice."""
    _thread.interrupt_main(signal.SIGINT)


def _tune_gc() -> None:
    """Garbage collection for a run that has the process to itself (the `assay` command).

    What the imports made lives until the process exits: frozen, collections no longer walk it.
    And a run allocates a dozen objects an item, almost none of them in cycles: collecting the
    young generation every 10,000 allocations instead of every 700 cut the collector's CPU on a
    10,000-item run from ~0.8 s to ~0.1 s (benchmarks/throughput.py, docs/performance.md).
    """
    gc.freeze()
    gc.set_threshold(10_000, 20, 10)


def _run_flow(orchestrated: bool) -> Any:
    """`assay-run` under Prefect, else the plain driver it wraps (no Prefect imported)."""
    if orchestrated:
        from flows.run import run_eval

        return run_eval
    from assay.orchestrate.run import drive_run

    return drive_run


def _rescore_flow(orchestrated: bool) -> Any:
    from flows.rescore import rescore_run

    return rescore_run if orchestrated else rescore_run.fn


def _run(args: argparse.Namespace) -> int:
    from assay.run.plan import validate

    keys = {"check_keys": True} if args.check_keys else {}
    return _execute(args, _run_flow, lambda: validate(Path(args.spec)), spec=args.spec, **keys)


def _rescore(args: argparse.Namespace) -> int:
    from assay.run.rescore import parse_scorers
    from assay.store import Store

    def check() -> None:
        Store(args.store).read_run(args.source_run_id)
        parse_scorers(spec_path=Path(args.spec) if args.spec else None, inline=args.scorer)

    return _execute(
        args,
        _rescore_flow,
        check,
        source_run_id=args.source_run_id,
        spec=args.spec,
        scorers=args.scorer or None,
        budget=args.budget,
        concurrency=args.concurrency,
        capture_requests=args.capture_requests,
    )


def _resume(args: argparse.Namespace) -> int:
    from assay.outcomes import RunKind
    from assay.run.plan import failure_selector, spec_for_resume, validate
    from assay.store import Store

    record = Store(args.store).read_run(args.run_id)
    if record["kind"] == RunKind.RESCORE and args.retry_failed is not None:
        raise InputError("--retry-failed: a rescore calls no target; resume its source run instead")
    if record["kind"] == RunKind.RESCORE:
        return _execute(
            args,
            _rescore_flow,
            lambda: None,
            source_run_id=record["source_run_id"],
            spec=record["spec_path"],
            run_id=args.run_id,
            resume=True,
        )
    spec = spec_for_resume(Store(args.store), args.run_id)
    retry = None if args.retry_failed is None else [k.strip() for k in args.retry_failed.split(",") if k.strip()]
    if retry is not None:
        failure_selector(retry)  # a word that is no failure kind: exit 2 before anything runs
    return _execute(
        args,
        _run_flow,
        lambda: validate(spec),
        spec=str(spec),
        run_id=args.run_id,
        resume=True,
        cell=record["cell"],
        **({"retry_failed": retry} if retry is not None else {}),
    )


def _compare(args: argparse.Namespace) -> int:
    from pydantic import ValidationError

    from assay.analysis.compare import CompareOptions, load_sides
    from assay.cli import _terminal
    from assay.errors import SpecError
    from assay.spec import describe_errors
    from assay.store import Store
    from flows.compare import compare_runs

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
        )
    except ValidationError as exc:
        raise SpecError(describe_errors(exc)) from None
    params = {"baseline": args.baseline, "candidate": args.candidate, "store": args.store, "options": options}
    if args.prefect or _prefect_env.api_configured():
        load_sides(Store(args.store), args.baseline, args.candidate)
        _prefect_env.check_api()
        # A failed gate fails the flow run (its state carries the comparison): read it back.
        comparison = compare_runs(**params, return_state=True).result(raise_on_failure=False)
        if isinstance(comparison, BaseException):  # the flow run crashed: its exception, not a comparison
            raise comparison
    else:
        comparison = compare_runs.fn(**params)
    if args.json:
        print(json.dumps(comparison, default=str, indent=2))
    elif not args.quiet:
        _terminal.print_comparison(comparison)
    return EXIT_OK if comparison["passed"] else EXIT_GATE


def _power(args: argparse.Namespace) -> int:
    from assay.analysis.compare import power_report
    from assay.cli import _terminal
    from assay.store import Store

    report = power_report(Store(args.store), args.run_id, args.mde, power=args.power)
    if args.json:
        print(json.dumps(report, indent=2))
    elif not args.quiet:
        _terminal.print_power(report)
    return EXIT_OK


def _estimate(args: argparse.Namespace) -> int:
    from assay.analysis.estimate import estimate
    from assay.cli import _terminal
    from assay.store import Store

    report = estimate(args.spec, store=Store(args.store))
    if args.json:
        print(json.dumps(report, indent=2))
    elif not args.quiet:
        _terminal.print_estimate(report)
    return EXIT_OK


def _nightly(args: argparse.Namespace) -> int:
    from assay.run.plan import validate
    from flows.nightly import nightly

    if args.retention < 1:
        raise InputError(f"--retention {args.retention}: keep at least 1 run")
    for spec in args.specs:
        validate(Path(spec))
    params = {"specs": args.specs, "store": args.store, "retention": args.retention}
    if args.prefect or _prefect_env.api_configured():
        _prefect_env.check_api()
        # A failed gate fails the flow run; its state still carries the report.
        report = asyncio.run(nightly(**params, return_state=True)).result(raise_on_failure=False)
        if isinstance(report, BaseException):  # the flow run crashed: its exception, not a report
            raise report
    else:
        report = asyncio.run(nightly.fn(**params))
    if args.json:
        print(json.dumps(report, default=str, indent=2))
    elif not args.quiet:
        for spec in report["specs"]:
            comparison = spec.get("comparison")
            lines = comparison["lines"] if comparison else [spec.get("note", "")]
            print(f"{spec['name']} {spec['run_id']} ({spec['status']}): " + " | ".join(lines))
            if spec.get("removed"):
                print(f"  removed {len(spec['removed'])} old nightly run(s): {', '.join(spec['removed'])}")
        for failure in report["failures"]:
            print(f"gate failed: {failure}")
    return EXIT_OK if report["passed"] else EXIT_GATE


def _leaderboard(args: argparse.Namespace) -> int:
    from assay.analysis.leaderboard import build_leaderboard
    from assay.cli import _terminal
    from assay.store import Store

    board = build_leaderboard(Store(args.store), args.matrix_id, baseline_cell=args.baseline)
    if args.json:
        print(json.dumps(board, default=str, indent=2))
    elif not args.quiet:
        _terminal.print_leaderboard(board)
    return EXIT_OK


def _requests(args: argparse.Namespace) -> int:
    from assay.calls.capture import stored_records
    from assay.calls.request_codec import validate_jsonl, write_jsonl
    from assay.store import Store

    if args.requests_command == "export":
        store = Store(args.store)
        store.read_run(args.run_id)
        records = stored_records(store.run_requests(args.run_id).to_dicts())
        write_jsonl(records, sys.stdout, v1=args.format == "v1")
        return EXIT_OK
    count, problem = validate_jsonl(Path(args.file))
    if problem is not None:
        print(f"error: {args.file}: {problem}", file=sys.stderr)
        return EXIT_INPUT
    print(f"{args.file}: {count} valid records")
    return EXIT_OK


def _ui(args: argparse.Namespace) -> int:
    from assay.orchestrate.ui import serve

    return serve(port=args.port, home=Path(args.home) if args.home else None, log_dir=Path(args.logs))


def _report(args: argparse.Namespace) -> int:
    from assay.report import write_report
    from assay.store import Store

    path = write_report(Store(args.store), args.run_id, baseline=args.baseline, out=args.out)
    print(json.dumps({"path": str(path)}) if args.json else path)
    return EXIT_OK


def _clean(args: argparse.Namespace) -> int:
    import docker.errors

    from assay.sandbox.hygiene import clean

    if bool(args.run_ids) == args.all:
        print("error: name runs to clean, or --all (not both)", file=sys.stderr)
        return EXIT_INPUT
    try:
        removed = [clean(None)] if args.all else [clean(run_id) for run_id in args.run_ids]
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


def _show(args: argparse.Namespace) -> int:
    from assay.analysis.summary import summarise
    from assay.store import Store

    summary = summarise(Store(args.store), args.run_id)
    _print_summary(args, summary)
    return EXIT_GATE if summary["status"] == RunStatus.FAILED_GATE else EXIT_OK


def _ls(args: argparse.Namespace) -> int:
    from assay.cli import _terminal
    from assay.store import Store

    runs = (
        Store(args.store)
        .runs()
        .select(
            "run_id", "name", "kind", "cell", "status", "created_at", "n_planned", "n_completed", "n_failed"
        )
        .sort("created_at", descending=True)
        .head(args.limit)
        .collect()
    )
    if args.json:
        print(json.dumps(runs.to_dicts(), default=str, indent=2))
    elif not args.quiet:
        _terminal.print_runs(runs)
    return EXIT_OK


def _print_summary(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    if args.json:
        print(json.dumps(summary, default=str, indent=2))
        return
    if args.quiet:
        return
    from assay.cli import _terminal

    if "cells" in summary:
        for cell in summary["cells"]:
            _terminal.print_summary(cell)
        _terminal.print_leaderboard(summary["leaderboard"])
    else:
        _terminal.print_summary(summary)


_COMMANDS = {
    "run": _run,
    "estimate": _estimate,
    "resume": _resume,
    "rescore": _rescore,
    "compare": _compare,
    "power": _power,
    "nightly": _nightly,
    "leaderboard": _leaderboard,
    "requests": _requests,
    "ui": _ui,
    "report": _report,
    "clean": _clean,
    "show": _show,
    "ls": _ls,
}

if __name__ == "__main__":
    sys.exit(main())
