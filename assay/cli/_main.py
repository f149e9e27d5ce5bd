"""`main`: the command line parsed, the command run, and every way it can end turned into an exit
status and a message on stderr."""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable

from assay.cli import _commands, _flows, _labels, _stdout, _view
from assay.cli._parser import EXIT_INPUT, EXIT_INTERRUPTED, EXIT_LOST, EXIT_OUTPUT, build_parser
from assay.errors import InputError, LeaseLostError
from assay.flows import prefect_env as _prefect_env
from assay.settings import settings

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "run": _flows.run,
    "estimate": _commands.estimate,
    "resume": _flows.resume,
    "rescore": _flows.rescore,
    "compare": _flows.compare,
    "power": _commands.power,
    "nightly": _flows.nightly,
    "leaderboard": _commands.leaderboard,
    "requests": _commands.requests,
    "trajectories": _commands.trajectories,
    "ui": _commands.ui,
    "report": _commands.report,
    "clean": _commands.clean,
    "show": _commands.show,
    "ls": _commands.ls,
    "labels": _labels.labels,
    "agreement": _labels.agreement,
    "view": _view.view,
}


def main(argv: list[str] | None = None) -> int:
    """The `assay` command.

    Args:
        argv: the arguments; None reads the process's own, and means this is the `assay` process,
            which exits next.
    """
    if argv is None:
        _stdout.install()
    try:
        code = _main(argv)
        if argv is None and not _stdout.flushed():
            return EXIT_OUTPUT
        return code
    finally:
        if argv is None:
            # The interpreter's last garbage collections walk every object the imports made
            # (Polars, PyArrow, pydantic models): ~1 s of a short run's exit here. Frozen, they are
            # skipped; the memory goes back to the OS all the same.
            gc.freeze()


def _main(argv: list[str] | None) -> int:
    args = build_parser().parse_args(argv)
    args.own_process = argv is None
    # `assay ui`'s server, worker and flow runs log to their files and the UI at Prefect's own levels.
    _prefect_env.configure(verbose=args.verbose or args.command == "ui")
    try:
        settings()  # every ASSAY_* value checked before the command does anything
        _check_store(args)
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
        print(_interrupted_hint(), file=sys.stderr)
        return EXIT_INTERRUPTED


def _check_store(args: argparse.Namespace) -> None:
    """A `--store` (or `$ASSAY_STORE`) that cannot be a store is bad input before the command
    does anything: a file, or an s3:// URL without credentials."""
    if not hasattr(args, "store"):
        return
    from assay.store import default_root, root_problem

    if (problem := root_problem(args.store or default_root())) is not None:
        raise InputError(problem)


def _interrupted_hint() -> str:
    """What Ctrl-C left behind, naming the runs it cancelled and the command that continues each."""
    from assay.run import progress

    run_ids = progress.take_cancelled()
    if not run_ids:
        return "interrupted before a run started: nothing was stored"
    resumes = ", ".join(f"`assay resume {run_id}`" for run_id in run_ids)
    return f"interrupted: finished items are stored; {resumes} " + (
        "continues it" if len(run_ids) == 1 else "continue them"
    )
