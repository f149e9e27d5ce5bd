"""What a command prints when it is done: JSON for scripts (`--json`), nothing (`--quiet`), or
what `_terminal` draws for a person (rich, imported only then)."""

from __future__ import annotations

import argparse
import json
from typing import Any


def emit(args: argparse.Namespace, result: Any, show: str, *, drawn: Any = None) -> None:
    """Print a command's result the way its flags ask.

    Args:
        args: the command line (`--json`, `--quiet`).
        result: what the command found or did (JSON-able; dates and the like as text).
        show: the `_terminal` function that draws it for a person, e.g. `"print_power"`.
        drawn: what that function is given, when not `result` (a table rather than its rows).
    """
    if args.json:
        print(json.dumps(result, default=str, indent=2))
    elif not args.quiet:
        from assay.cli import _terminal  # rich: loaded only when there is something to draw

        getattr(_terminal, show)(result if drawn is None else drawn)


def emit_summary(args: argparse.Namespace, summary: dict[str, Any]) -> None:
    """A run's summary, or a matrix run's: each cell's, then the leaderboard.

    Args:
        args: the command line (`--json`, `--quiet`).
        summary: what `summarise` (or a matrix run) returned.
    """
    emit(args, summary, "print_matrix_summary" if "cells" in summary else "print_summary")
