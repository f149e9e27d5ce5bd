"""The `assay` command as tests run it: in this process (`assay_json`, `assay_out`) or as a process
of its own (`assay_process_json`), its exit code asserted and its output parsed.

Each takes the exit code the situation calls for (`assay.cli`'s `EXIT_*`: 0 done, 1 a gate failed,
2 bad input, 3 the run was lost, 130 interrupted) and fails, showing what the command printed, when
the command exits with another: a gate that starts failing cannot pass unnoticed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from assay.cli import EXIT_OK, main
from assay.store import Store

REPO = Path(__file__).resolve().parents[2]


class Printed(NamedTuple):
    """What a command printed."""

    out: str
    err: str


def assay_out(capsys: pytest.CaptureFixture[str], *argv: str | Path, code: int = EXIT_OK) -> Printed:
    """`assay <argv>` in this process: asserts it exits `code`; what it printed."""
    exited = main([str(arg) for arg in argv])
    printed = Printed(*capsys.readouterr())
    assert exited == code, (
        f"`assay {_shown(argv)}` exited {exited}, not {code}:\n{printed.out}\n{printed.err}"
    )
    return printed


def assay_json(capsys: pytest.CaptureFixture[str], *argv: str | Path, code: int = EXIT_OK) -> Any:
    """`assay <argv> --json` in this process: asserts it exits `code`; the JSON it printed."""
    return _parsed(assay_out(capsys, *argv, "--json", code=code), argv)


def assay_run(
    capsys: pytest.CaptureFixture[str], spec: str | Path, store: str | Path, *, code: int = EXIT_OK
) -> tuple[Any, Store]:
    """`assay run SPEC --store STORE --json` in this process: asserts it exits `code`; the run's
    summary, and the store it wrote."""
    return assay_json(capsys, "run", spec, "--store", store, code=code), Store(store)


def assay_process_json(
    *argv: str | Path, code: int = EXIT_OK, env: dict[str, str] | None = None, timeout: float = 120
) -> Any:
    """`assay <argv> --json` as a process of its own, `env` over this environment: asserts it exits
    `code`; the JSON it printed."""
    done = subprocess.run(
        [sys.executable, "-m", "assay.cli", *map(str, argv), "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        cwd=REPO,
    )
    printed = Printed(done.stdout, done.stderr)
    assert done.returncode == code, (
        f"`assay {_shown(argv)}` exited {done.returncode}, not {code}:\n{printed.out}\n{printed.err[-3000:]}"
    )
    return _parsed(printed, argv)


def _parsed(printed: Printed, argv: tuple[str | Path, ...]) -> Any:
    try:
        return json.loads(printed.out)
    except ValueError:
        raise AssertionError(
            f"`assay {_shown(argv)}` printed no JSON:\n{printed.out}\n{printed.err}"
        ) from None


def _shown(argv: tuple[str | Path, ...]) -> str:
    return " ".join(map(str, argv))
