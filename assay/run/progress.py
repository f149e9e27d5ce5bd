"""Where item-level progress goes while a run executes.

The CLI installs a reporter (a live progress bar); flows and the Prefect UI run without one.
A module-level hook rather than a flow parameter, because Prefect sends parameters to its API
as JSON and a callback is not JSON.
"""

from __future__ import annotations

from typing import Protocol

from assay.calls import batch
from assay.calls.batch import BatchCounts


class Reporter(Protocol):
    def started(self, total: int, already_done: int) -> None: ...

    def item_done(self, outcome: str, cost_usd: float | None = None) -> None: ...

    def batches(self, label: str, counts: BatchCounts) -> None:
        """Batch mode: one batcher's batches (`label`: `target`, `judge <name>`) in flight and ended."""
        ...


class _Silent:
    def started(self, total: int, already_done: int) -> None:
        pass

    def item_done(self, outcome: str, cost_usd: float | None = None) -> None:
        pass

    def batches(self, label: str, counts: BatchCounts) -> None:
        pass


_reporter: Reporter = _Silent()
# Runs this process stopped on a cancellation (Ctrl-C, SIGTERM): the CLI names them in its hint.
_cancelled: list[str] = []


def current() -> Reporter:
    return _reporter


def install(reporter: Reporter | None) -> None:
    """Install `reporter` for runs in this process (None restores the silent one)."""
    global _reporter
    _reporter = reporter or _Silent()
    batch.watch(reporter.batches if reporter is not None else None)


def cancelled(run_id: str) -> None:
    """Note that this process recorded `run_id` as cancelled."""
    _cancelled.append(run_id)


def take_cancelled() -> list[str]:
    """The runs noted by `cancelled` since the last call, in order; forgets them."""
    taken = list(_cancelled)
    _cancelled.clear()
    return taken
