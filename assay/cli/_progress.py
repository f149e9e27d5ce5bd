"""What a person at a terminal sees while a run runs: a live progress bar on stderr (rich)."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import Any

from rich.console import Console, RenderableType
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from assay.calls.batch import BatchCounts
from assay.calls.waits import Wait
from assay.outcomes import ItemOutcome
from assay.run import progress


class _WithLines(Progress):
    """A progress bar with lines of text under it (batch mode's batches)."""

    def __init__(self, *columns: Any, **options: Any) -> None:
        self.lines: dict[str, str] = {}  # first: the constructor renders once
        super().__init__(*columns, **options)

    def get_renderables(self) -> Iterable[RenderableType]:
        yield self.make_tasks_table(self.tasks)
        for line in list(self.lines.values()):
            yield Text(line)


class _Waiting(ProgressColumn):
    """What the calls still running wait on (`waiting: judge retry 2/5 in 3 s`), counted down at
    each refresh."""

    def __init__(self, waits: dict[int, Wait]) -> None:
        self._waits = waits
        super().__init__()

    def render(self, task: Any) -> Text:
        return Text(progress.waiting_text(self._waits, time.monotonic()), style="yellow")


class _ProgressBar:
    """done / total, failures, items/s (over the items run in this process, once it means
    something), spend, ETA and what the calls wait on, on stderr; in batch mode each batcher's
    batches in flight and done with the requests inside them; nothing when stderr is not a
    terminal."""

    def __init__(self) -> None:
        self._waits: dict[int, Wait] = {}
        self._progress = _WithLines(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("[red]{task.fields[failed]} failed"),
            TextColumn("{task.fields[rate]}"),
            TextColumn("{task.fields[spend]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            _Waiting(self._waits),
            console=Console(stderr=True),
            transient=True,
        )
        self._task: Any = None
        self._failed = self._ran = 0
        self._spent = 0.0
        self._started = time.monotonic()

    def started(self, total: int, already_done: int) -> None:
        self._started, self._ran = time.monotonic(), 0
        self._progress.start()
        self._task = self._progress.add_task(
            "items", total=total, completed=already_done, failed=0, rate="", spend=""
        )

    def item_done(self, outcome: str, cost_usd: float | None = None, cached: bool = False) -> None:
        if outcome == ItemOutcome.FAILED:
            self._failed += 1
        self._ran += not cached
        self._spent += cost_usd or 0.0
        task = self._progress.tasks[0]
        per_s = progress.rate(self._ran, time.monotonic() - self._started)
        rate = f"{per_s:,.1f} items/s" if per_s is not None else ""
        spend = f"${self._spent:,.4f} spent" if self._spent else ""
        self._progress.update(self._task, advance=1, failed=self._failed, rate=rate, spend=spend)
        if task.completed >= (task.total or 0):
            self._progress.stop()

    def waiting(self, wait: Wait, begun: bool) -> None:
        if begun:
            self._waits[id(wait)] = wait
        else:
            self._waits.pop(id(wait), None)

    def batches(self, label: str, counts: BatchCounts) -> None:
        self._progress.lines[label] = (
            f"{label} batches: {counts.in_flight} in flight ({counts.requests_in_flight} requests), "
            f"{counts.ended} done ({counts.requests_done} requests)"
        )  # drawn at the bar's next refresh


def progress_bar() -> Any:
    """A reporter for `assay.run.progress`, or None when stderr is not a terminal."""
    return _ProgressBar() if sys.stderr.isatty() else None
