"""A run's budget on a cluster: every worker process admits calls against the run's spend, not
its own (`assay run --dask` with `budget`).

The run's spend is held by a host every worker reaches (a Dask scheduler:
`assay.calls.fleet_dask.BudgetHost`), keyed by run and lease generation, and starting from what
the run had spent when its driver planned it. Each worker's budget is a `SharedBudget`: it counts
its own spend at once and, while its shards run, reports what it spent since its last report
(and what it holds reserved for batch requests) as soon as it spent it — one report at a time,
at least every `SYNC_S` — and learns back the run's total and the other workers' reservations; once
more when each shard ends. No call waits for a round trip: a worker sees the others' spend one
report late (a scheduler round trip, a few ms), so past the limit a cluster admits the calls its
workers start within that time besides those already in flight (which a local run lets finish
too). A worker that dies loses its last report; the driver stores the host's total with the run
(`budget_spent_usd`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any, Protocol

from assay.calls.accounting import Budget
from assay.outcomes import BudgetClosedBy

SYNC_S = 0.1  # how often a worker whose shards run reports, spent or not (the others' spend)

logger = logging.getLogger(__name__)


def budget_key(run_id: str, generation: int) -> str:
    """A run's key at the host: an execution of it (a resumed run counts from its own plan)."""
    return f"{run_id}:g{generation}"


class BudgetLink(Protocol):
    """A worker's way to the host (`assay.calls.fleet_dask.DaskBudgetLink`)."""

    async def __call__(self, key: str, report: dict[str, Any]) -> dict[str, Any]:
        """Send one report on run `key`; the run's state back (`FleetBudget.sync`). Raises
        OSError when the host cannot be reached."""
        ...

    def abort(self) -> None:
        """Drop the connection (a later report opens another)."""
        ...


@dataclass
class FleetBudget:
    """The host's state of one run's budget.

    Args:
        spent_usd: the run's spend (what it had spent when planned, plus every report since).
    """

    spent_usd: float
    closed_by: str | None = None
    reserved: dict[str, float] = field(default_factory=dict)  # by member

    def sync(self, report: dict[str, Any]) -> dict[str, Any]:
        """Take one member's report (`member`, `spent_usd` since its last report, `reserved_usd`
        it holds now, `closed_by` if it met the closed budget); the run's state back: its
        spend, the others' reservations and what first met the closed budget."""
        member = str(report["member"])
        self.spent_usd += float(report["spent_usd"])
        self.reserved[member] = float(report["reserved_usd"])
        if self.closed_by is None and report.get("closed_by"):
            self.closed_by = str(report["closed_by"])
        return {
            "spent_usd": self.spent_usd,
            "others_reserved_usd": sum(v for m, v in self.reserved.items() if m != member),
            "closed_by": self.closed_by,
        }

    def summary(self) -> dict[str, Any]:
        return {"spent_usd": self.spent_usd, "closed_by": self.closed_by}


class SharedBudget(Budget):
    """A worker's view of a run's budget, kept in step with the host (see the module docstring).

    Args:
        limit_usd: the run's limit.
        spent_usd: what the run had spent when its driver planned it.
        key: the run's key at the host (`<run_id>:g<generation>`).
        link: the way to the host.
    """

    def __init__(self, limit_usd: float | None, spent_usd: float, *, key: str, link: BudgetLink) -> None:
        super().__init__(limit_usd, spent_usd)
        self.key = key
        self._link = link
        self._start_usd = spent_usd
        self._member = uuid.uuid4().hex
        self._unreported = 0.0
        self._others_reserved = 0.0
        self._news = asyncio.Event()  # spent (or reserved) since the last report
        self._one_at_a_time = asyncio.Lock()  # the shards of one worker report in turn
        self._unreachable = False

    @property
    def closed(self) -> bool:
        return (
            self.limit_usd is not None
            and self.spent_usd + self.reserved_usd + self._others_reserved >= self.limit_usd
        )

    def spend(self, usd: float) -> None:
        super().spend(usd)
        self._unreported += usd
        self._news.set()

    def reserve(self, usd: float) -> None:
        super().reserve(usd)
        self._news.set()

    def release(self, usd: float) -> None:
        super().release(usd)
        self._news.set()

    async def keep_reporting(self) -> None:
        """Report as soon as this worker spent, else every `SYNC_S`, until cancelled."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(SYNC_S):
                    await self._news.wait()
            self._news.clear()
            await self.sync()

    def close(self) -> None:
        """The run ended in this worker: its connection to the host goes."""
        self._link.abort()

    async def sync(self) -> None:
        """Report this worker's spend since the last report; learn the run's. A host that cannot
        be reached keeps the spend for the next report."""
        async with self._one_at_a_time:
            await self._sync()

    async def _sync(self) -> None:
        spent, self._unreported = self._unreported, 0.0
        report = {
            "member": self._member,
            "start_usd": self._start_usd,
            "spent_usd": spent,
            "reserved_usd": self.reserved_usd,
            "closed_by": self.closed_by.value if self.closed_by is not None else None,
        }
        try:
            state = await self._link(self.key, report)
        except OSError as exc:
            self._unreported += spent
            if not self._unreachable:
                logger.warning(
                    "budget of %s: the host is unreachable (%s); this worker's spend is kept to report "
                    "later, and it admits calls against what it knows",
                    self.key,
                    exc,
                )
            self._unreachable = True
            return
        self._unreachable = False
        # Spent meanwhile (while the report travelled) stays this worker's to report next.
        self.spent_usd = float(state["spent_usd"]) + self._unreported
        self._others_reserved = float(state["others_reserved_usd"])
        if self.closed_by is None and state.get("closed_by"):
            self.closed_by = BudgetClosedBy(state["closed_by"])
