"""Orchestration glue: driving a run or a rescore end to end, with or without Prefect.

    drive.py        the skeleton both follow (`drive`), and the `Host` that runs it (`EMBEDDED`:
                    the terminal; a Prefect flow run: `flows/_host.py`)
    run.py          `drive_run`: plan, gold check, execute every cell against its target, close
    rescore.py      `drive_rescore`: new scorers over a stored run's outputs
    finish.py       how an execution ends in its record (`finish_run`)
    prefect_env.py  whether the terminal runs under Prefect;  ui.py  `assay ui`, the local server

The public names are loaded on first use: `assay.cli` imports `prefect_env` for every command,
and the drivers bring in the whole run machinery.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

_PUBLIC = {
    "EMBEDDED": "assay.orchestrate.drive",
    "Host": "assay.orchestrate.drive",
    "drive": "assay.orchestrate.drive",
    "drive_run": "assay.orchestrate.run",
    "drive_rescore": "assay.orchestrate.rescore",
    "finish_run": "assay.orchestrate.finish",
}

__all__ = ["EMBEDDED", "Host", "drive", "drive_rescore", "drive_run", "finish_run"]


def __getattr__(name: str) -> Any:
    if name not in _PUBLIC:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_PUBLIC[name]), name)
