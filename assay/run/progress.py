"""Where item-level progress goes while a run executes.

The CLI installs a reporter (a live progress bar); a Prefect flow run adds one that logs
(`Logged`, through the flow run's logger: the Logs tab of the UI). A module-level hook rather
than a flow parameter, because Prefect sends parameters to its API as JSON and a callback is
not JSON.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Protocol

from assay import numbers
from assay.calls import batch, waits
from assay.calls.batch import BatchCounts
from assay.calls.waits import Wait
from assay.outcomes import ItemOutcome

# A progress line at least this often while items finish, besides one at each tenth of the run.
LOG_EVERY_S = 5.0
# items/s is shown once this many items ran in this process, over at least this long: the first
# items (and a resume's items done before) make a rate of nonsense.
RATE_AFTER_ITEMS = 5
RATE_AFTER_S = 2.0
# A wait between attempts is logged when at most this many items are left (the run's tail).
WAITS_LOGGED_WHEN_LEFT = 5


def rate(ran: int, elapsed_s: float) -> float | None:
    """Items a second over `ran` items run in this process in `elapsed_s`, or None while that
    says nothing yet."""
    if ran < RATE_AFTER_ITEMS or elapsed_s < RATE_AFTER_S:
        return None
    return ran / elapsed_s


def waiting_text(pending: dict[int, Wait], now: float) -> str:
    """`waiting: judge retry 2/5 in 3 s` for the wait ending first (`(+1 more)` for the others),
    "" when nothing waits."""
    if not pending:
        return ""
    first = min(pending.values(), key=lambda wait: wait.until)
    more = f" (+{len(pending) - 1} more)" if len(pending) > 1 else ""
    return f"waiting: {first.what} in {max(0.0, first.until - now):.0f} s{more}"


class Reporter(Protocol):
    def started(self, total: int, already_done: int) -> None: ...

    def item_done(self, outcome: str, cost_usd: float | None = None, cached: bool = False) -> None:
        """An item ended; `cached`: its every call was answered from the response cache (no
        part of items/s, which measures the work done)."""
        ...

    def batches(self, label: str, counts: BatchCounts) -> None:
        """Batch mode: one batcher's batches (`label`: `target`, `judge <name>`) in flight and ended."""
        ...

    def waiting(self, wait: Wait, begun: bool) -> None:
        """A call's wait before its next attempt began (`begun`) or ended (`assay.calls.waits`)."""
        ...


class _Silent:
    def started(self, total: int, already_done: int) -> None:
        pass

    def item_done(self, outcome: str, cost_usd: float | None = None, cached: bool = False) -> None:
        pass

    def batches(self, label: str, counts: BatchCounts) -> None:
        pass

    def waiting(self, wait: Wait, begun: bool) -> None:
        pass


class Logged:
    """Progress as log lines: `progress: 20 of 40 items (50.0%) · 2 failed · 3.1 s · 6.5 items/s`,
    one at each tenth of the run and at least one every `every_s` seconds while items finish
    (items/s over the items run here, not answered from the cache, once `rate` says something); and, in the run's last few
    items, a line when a call starts waiting: `waiting: judge retry 2/5 in 3 s`.

    Args:
        log: where a line goes (a Prefect flow run's logger).
        every_s: the longest quiet stretch while items finish.
        clock: seconds, monotonic (a test's own clock).
    """

    def __init__(
        self,
        log: Callable[[str], None],
        every_s: float = LOG_EVERY_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._log, self._every_s, self._clock = log, every_s, clock
        self._total = self._done = self._failed = self._tenth = self._ran = 0
        self._started = self._last = clock()
        self._batches: dict[str, BatchCounts] = {}
        self._waits: dict[int, Wait] = {}

    def started(self, total: int, already_done: int) -> None:
        self._total, self._done, self._ran = total, already_done, 0
        self._tenth = self._tenth_of(already_done)
        self._started = self._last = self._clock()
        self._line()

    def item_done(self, outcome: str, cost_usd: float | None = None, cached: bool = False) -> None:
        self._done += 1
        self._ran += not cached
        self._failed += outcome == ItemOutcome.FAILED
        tenth, now = self._tenth_of(self._done), self._clock()
        if tenth > self._tenth or now - self._last >= self._every_s:
            self._tenth, self._last = tenth, now
            self._line()

    def _tenth_of(self, done: int) -> int:
        return done * 10 // self._total if self._total else 10

    def _line(self) -> None:
        share = numbers.pct(self._done / self._total) if self._total else "–"
        elapsed = self._clock() - self._started
        per_s = rate(self._ran, elapsed)
        self._log(
            f"progress: {self._done} of {self._total} items ({share}) · {self._failed} failed · "
            f"{elapsed:.1f} s" + (f" · {per_s:,.1f} items/s" if per_s is not None else "")
        )

    def waiting(self, wait: Wait, begun: bool) -> None:
        if not begun:
            self._waits.pop(id(wait), None)
            return
        self._waits[id(wait)] = wait
        if self._total - self._done <= WAITS_LOGGED_WHEN_LEFT:
            self._log(waiting_text({id(wait): wait}, time.monotonic()))

    def batches(self, label: str, counts: BatchCounts) -> None:
        """A line when a batcher's batches change: `batches (judge quality): 1 in flight (5
        requests), 2 done (10 requests)`."""
        if self._batches.get(label) != counts:
            self._batches[label] = counts
            self._log(
                f"batches ({label}): {counts.in_flight} in flight ({counts.requests_in_flight} requests), "
                f"{counts.ended} done ({counts.requests_done} requests)"
            )


class _Both:
    """Two reporters told the same."""

    def __init__(self, first: Reporter, second: Reporter) -> None:
        self._first, self._second = first, second

    def started(self, total: int, already_done: int) -> None:
        self._first.started(total, already_done)
        self._second.started(total, already_done)

    def item_done(self, outcome: str, cost_usd: float | None = None, cached: bool = False) -> None:
        self._first.item_done(outcome, cost_usd, cached)
        self._second.item_done(outcome, cost_usd, cached)

    def batches(self, label: str, counts: BatchCounts) -> None:
        self._first.batches(label, counts)
        self._second.batches(label, counts)

    def waiting(self, wait: Wait, begun: bool) -> None:
        self._first.waiting(wait, begun)
        self._second.waiting(wait, begun)


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
    waits.watch(reporter.waiting if reporter is not None else None)


@contextmanager
def also(reporter: Reporter | None) -> Iterator[None]:
    """Within the block, report to `reporter` too, beside the installed one (None: nothing added).

    Args:
        reporter: e.g. `Logged`, for a flow run's logs beside the terminal's bar.
    """
    global _reporter
    if reporter is None:
        yield
        return
    before = _reporter
    _reporter = _Both(before, reporter)
    batch.watch(_reporter.batches)
    waits.watch(_reporter.waiting)
    try:
        yield
    finally:
        _reporter = before
        batch.watch(before.batches)
        waits.watch(before.waiting)


def cancelled(run_id: str) -> None:
    """Note that this process recorded `run_id` as cancelled."""
    _cancelled.append(run_id)


def cancelled_so_far() -> list[str]:
    """The runs noted by `cancelled` and not yet taken, in order (they stay noted)."""
    return list(_cancelled)


def take_cancelled() -> list[str]:
    """The runs noted by `cancelled` since the last call, in order; forgets them."""
    taken = list(_cancelled)
    _cancelled.clear()
    return taken
