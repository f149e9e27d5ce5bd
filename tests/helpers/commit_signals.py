"""A python target that makes its own `assay` process stop or get a signal at an exact point of
its first commit — moments a real operator's signal or a paused VM hits only by chance.

`ASSAY_TEST_AT` in the process's environment says where, one or more of these, comma-separated
(read at import, so only the process started with it does anything; another process importing
this module is left alone):

- `sigterm-after-commit`: SIGTERM to itself the moment its first items part (the commit marker)
  is in place, before the batch's bookkeeping runs;
- `stop-before-commit`: SIGSTOP itself once its first batch passed its lease check, before any of
  its files is written (at the `mkdir` of the batch's staging folder, `.staging/run_id=<id>/part-…`);
- `stop-mid-commit`: SIGSTOP itself just before its first items part (the commit marker) is renamed
  into place, its scores part already in place;
- `stop-after-commit`: SIGSTOP itself just after, before it checks its lease again.

Python's audit hook sees the folder made (`os.mkdir`), the rename coming (`os.rename` events,
which `os.replace` raises) and the lease's next listing (`os.listdir`); a profile hook sees the
rename return.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import threading
from typing import Any

AT = set(filter(None, os.environ.get("ASSAY_TEST_AT", "").split(",")))
DELAY_S = float(os.environ.get("ASSAY_TEST_DELAY_S", "0.02"))
_committed = False


async def answer(question: str) -> str:
    """The target: the question back, after a short wait."""
    await asyncio.sleep(DELAY_S)
    return question


def _in(dataset: str, path: Any) -> bool:
    path = os.fspath(path)
    return f"{os.sep}{dataset}{os.sep}" in path and os.path.basename(path).startswith("part-")


def _staged_batch(path: Any) -> bool:
    folder, name = os.path.split(os.fspath(path))
    return f"{os.sep}.staging{os.sep}" in folder and name.startswith("part-")


def _once(point: str) -> bool:
    """Whether to act at `point` now (each point acts once)."""
    if point not in AT:
        return False
    AT.discard(point)
    return True


def _stop_here() -> None:
    """SIGSTOP the process from this thread: directed at the calling thread, the stop takes
    it before its next instruction (sent to the process, another of its threads — the loop, while
    the commit thread writes — could take it while this one runs on into the step it is at)."""
    signal.pthread_kill(threading.get_ident(), signal.SIGSTOP)


def _audit(event: str, args: tuple[Any, ...]) -> None:
    global _committed
    if event == "os.mkdir" and _staged_batch(args[0]) and _once("stop-before-commit"):
        _stop_here()
    elif event == "os.rename" and _in("scores", args[1]) and _once("sigterm-after-commit"):
        sys.setprofile(_profile)  # on for the items part's rename, which comes next
    elif event == "os.rename" and _in("items", args[1]) and not _committed:
        if _once("stop-mid-commit"):
            _stop_here()
        _committed = True
    elif event == "os.listdir" and _committed and _once("stop-after-commit"):
        _stop_here()


def _profile(frame: Any, event: str, arg: Any) -> None:
    if event == "c_return" and arg is os.replace and _committed:
        sys.setprofile(None)
        os.kill(os.getpid(), signal.SIGTERM)


if AT:
    sys.addaudithook(_audit)
