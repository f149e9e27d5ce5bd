"""The event loop items run on where Assay owns the loop: uvloop, unless told otherwise.

A run is bound by its event loop's thread (docs/performance.md): every item's admission, call,
scoring and rows pass through it, and the HTTP client wakes it once a reply is in. uvloop (libuv)
does that waking, scheduling and timer work in C, with less CPU a request than the standard loop
(docs/performance.md). Where Assay owns the loop — the terminal's embedded path and a
Dask worker's shard loop — it uses uvloop; under Prefect the loop is Prefect's.

`ASSAY_EVENT_LOOP=asyncio` runs on the standard library's loop instead (for debugging with
`PYTHONASYNCIODEBUG`, or where uvloop is not installed — it does not build on Windows).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from assay.settings import settings


def event_loop_factory() -> Callable[[], asyncio.AbstractEventLoop]:
    """A new loop of the kind `ASSAY_EVENT_LOOP` names (default uvloop; the standard one where
    uvloop is not installed).

    Raises:
        InputError: `ASSAY_EVENT_LOOP` names no loop Assay knows.
    """
    if settings().event_loop == "uvloop":
        try:
            import uvloop
        except ModuleNotFoundError:
            return asyncio.new_event_loop
        return uvloop.new_event_loop
    return asyncio.new_event_loop
