"""One rate controller for a fleet: the window of an (endpoint, model) held in one place, its
calls made by many processes (`assay/calls/rate.py` chooses where; docs/rate-control.md).

The fleet's window is an ordinary `RateController` kept by a host every process reaches (a Dask
scheduler: `assay.calls.fleet_dask`), or — with a Prefect server, which cannot run it — the
limit of a global concurrency limit each member moves by the same rules and whose slots it leases
(`assay.calls.fleet_prefect`: the grant is computed by the member's link; the sync below is the
same). Each process — a Dask worker, a second `assay run`, a run on another machine — is a
*member*: a `SharedRateController` that admits its own calls locally and, every sync period
(`Link.period_s`) while it calls (at once after a refusal, or when its share is used up and a call
waits), tells the host what it saw and learns its share back:

- the member reports the answers since its last report (status and the `retry-after` /
  `x-ratelimit-*` headers the controller reads), its calls in flight and its calls waiting;
- the host replays those answers into the fleet's controller (slow start, halving once per
  window on a 429, the pause until `Retry-After`, the server's remaining count), then divides the
  window among the members by their demand (max-min fair: no member gets more than it asks, the
  rest is shared evenly) and `rpm` / `tpm` in proportion to those shares;
- the member may have its share of calls in flight, paced to its share of `rpm` / `tpm`, and
  sends nothing before the fleet's pause has passed.

So no request pays a round trip to the host: a member leases a share of the window for one sync
period at a time (documented cost: docs/rate-control.md). A member that stops reporting for
`MEMBER_TTL_S` (its process ended or died) loses its share. A refusal pauses the member that got
it at once and the rest of the fleet at their next sync (≤ one period); the shares add up to the
window, so the calls in flight across the fleet stay within it as they would in one process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from assay.calls.aimd import DECREASE, RateController
from assay.calls.http import RATE_LIMIT_STATUSES

SYNC_S = 0.1  # how often a member that is calling reports to a Dask scheduler
IDLE_SYNC_S = 1.0  # how often an idle member says it is still there
MEMBER_TTL_S = 5.0  # a member silent this long has left the fleet
_FALLBACK_AFTER_S = 10.0  # host unreachable this long: the member controls its calls alone
_LEAVE_TIMEOUT_S = 5.0  # leaving hands back leases (a few round trips); else they expire

logger = logging.getLogger(__name__)


class Link(Protocol):
    """A member's way to its host (`assay.calls.fleet_dask.DaskLink`,
    `assay.calls.fleet_prefect.PrefectLink`)."""

    period_s: float  # how often a member that is calling syncs

    async def __call__(self, name: str, report: dict[str, Any]) -> dict[str, Any]:
        """Send one report on endpoint `name`; the grant back. Raises OSError when the host
        cannot be reached."""
        ...

    def abort(self) -> None:
        """Drop the connection without waiting (a later call opens another)."""
        ...


@dataclass
class _Member:
    ceiling: int
    in_flight: int = 0
    demand: int = 0
    quota: int = 0
    # The grant before `quota`: the member admits calls to it until `quota` reaches it.
    previous: int = 0
    seen: float = field(default_factory=time.monotonic)


class FleetWindow:
    """The host's state of one (endpoint, model): the fleet's controller and its members.

    Args:
        name: `<base_url> <model>`.
        ceiling: the first member's `concurrency` (the widest asked is the fleet's ceiling).
    """

    def __init__(self, name: str, ceiling: int) -> None:
        self.controller = RateController(name, ceiling)
        self.members: dict[str, _Member] = {}
        self.most_members = 0

    def sync(self, report: Mapping[str, Any]) -> dict[str, Any]:
        """Take one member's report; return its grant.

        Args:
            report: `member` (id), `ceiling`, `rpm`, `tpm` (the member's settings), `in_flight`,
                `waiting` and `answers` ([status, {header: value}] since its last report);
                `leaving: true` when the member is done (its `answers` the last it had).
        """
        now = time.monotonic()
        control = self.controller
        member_id = str(report["member"])
        if report.get("leaving"):
            self.members.pop(member_id, None)
        else:
            member = self.members.setdefault(member_id, _Member(int(report["ceiling"])))
            member.ceiling = int(report["ceiling"])
            member.in_flight = int(report["in_flight"])
            member.demand = min(member.ceiling, member.in_flight + int(report["waiting"]))
            member.seen = now
        for gone in [m for m, v in self.members.items() if now - v.seen > MEMBER_TTL_S]:
            del self.members[gone]
        self.most_members = max(self.most_members, len(self.members))
        # The fleet's settings: the widest ceiling asked, the lowest limits given.
        ceiling = max((m.ceiling for m in self.members.values()), default=control.ceiling)
        if control.threshold >= control.ceiling:  # still in slow start: it runs to the new ceiling
            control.threshold = float(ceiling)
        control.ceiling = ceiling
        for key in ("rpm", "tpm"):
            if report.get(key):
                setattr(control, key, min(getattr(control, key) or report[key], report[key]))
        control.in_flight = sum(m.in_flight for m in self.members.values())
        if report.get("paced"):
            control.waited_for_turn()
        for status, headers in report.get("answers", ()):
            control.observe(status, headers)
        window = int(control.limit)
        shares = fair_shares(window, {m: v.demand for m, v in self.members.items()})
        # The others keep what they were granted until they sync: never grant past the window.
        # A member's in-flight count is as old as its report: until its next one it may have up
        # to its earlier grant in flight, or this one.
        held = sum(max(v.quota, v.previous, v.in_flight) for m, v in self.members.items() if m != member_id)
        quota = min(shares.get(member_id, 0), max(0, window - held))
        if member_id in self.members:
            member = self.members[member_id]
            member.previous, member.quota = member.quota, quota
        # `rpm` / `tpm` — the lower of `rate_limits` and the pace the fleet learned — divided as
        # the window is: by the shares granted (a lone member gets all).
        others = sum(v.quota for m, v in self.members.items() if m != member_id)
        fraction = quota / (quota + others) if quota else 0.0
        rpm, tpm = control.pacing()
        return {
            "quota": quota,
            "window": control.limit,
            "pause_s": control.pause_left(now),
            "rpm": rpm * fraction if rpm else None,
            "tpm": tpm * fraction if tpm else None,
            "members": len(self.members),
            "rate_limited": control.rate_limited,
            "learned_rpm": control.pace.rpm,
            "announced_rpm": control.pace.announced,
        }

    def summary(self) -> dict[str, Any]:
        """The fleet's controller as stored with a run: its window, the answers of every member
        (every run sharing it), its history."""
        return {**self.controller.summary(), "share": "dask", "members": self.most_members}


def fair_shares(window: int, demands: Mapping[str, int]) -> dict[str, int]:
    """Divide `window` slots max-min fairly: each member gets at most its demand, and what the
    members that want less leave is shared evenly among the rest (whole slots; the remainder to
    the members asking most).

    Args:
        window: the slots to divide.
        demands: each member's calls in flight plus waiting.
    """
    shares = dict.fromkeys(demands, 0)
    left = max(0, window)
    wanting = sorted((d, m) for m, d in demands.items() if d > 0)
    while wanting and left > 0:
        each = left // len(wanting)
        if each == 0:  # fewer slots than members: one each to those asking most
            for _, member in reversed(wanting[-left:]):
                shares[member] += 1
            break
        smallest, _ = wanting[0]
        give = min(each, smallest)
        for i, (demand, member) in enumerate(wanting):
            shares[member] += give
            wanting[i] = (demand - give, member)
        left -= give * len(wanting)
        wanting = [(d, m) for d, m in wanting if d > 0]
    return shares


class SharedRateController(RateController):
    """A member of a fleet's controller: admits this process's calls within the share the host
    grants (see the module docstring). Same interface as `RateController`.

    Args:
        name: `<base_url> <model>`.
        ceiling: this process's `concurrency` for the endpoint.
        sync: the host's sync.
        share: the backend's name, as stored with the run (`dask`, `prefect`).
        rpm, tpm: the target's `rate_limits` (the fleet paces to the lowest given).
    """

    def __init__(
        self,
        name: str,
        ceiling: int,
        *,
        sync: Link,
        share: str,
        rpm: float | None = None,
        tpm: float | None = None,
    ) -> None:
        self.window = 0.0  # the fleet's window, as the host last said
        self._alone = False  # the host stayed unreachable: control alone, as a local controller
        super().__init__(name, ceiling, rpm=rpm, tpm=tpm)
        self.share = share
        self.limit = 0.0  # no share before the first grant
        self.members = 0
        self.most_members = 0
        self._sync = sync
        self._member = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._granted: tuple[float | None, float | None] = (None, None)
        self._fleet_pace: tuple[float | None, float | None] = (None, None)  # learned, announced
        self._answers: list[list[Any]] = []
        self._nudge: asyncio.Event | None = None
        # Held for each report: closing waits for one in progress instead of cutting it off (its
        # answers would be lost to the fleet's count, or counted twice if sent again).
        self._reporting: asyncio.Lock | None = None
        self._task: asyncio.Task[None] | None = None
        self._unreachable_since: float | None = None
        self._cut = False  # the share was halved for a refusal the host has not answered yet
        self._waited = False  # a call waited for its turn since the last report

    # -- admission: the local controller's, within the granted share ----------------------------

    async def acquire(self, tokens: int = 0) -> None:
        self._ensure_syncing()
        await super().acquire(tokens)

    def pacing(self) -> tuple[float | None, float | None]:
        return (self.rpm, self.tpm) if self._alone else self._granted

    def waited_for_turn(self) -> None:
        if self._alone:
            super().waited_for_turn()
        else:  # the host's pace, told at the next report
            self._waited = True

    def _window_full(self) -> None:
        self._ensure_syncing()  # a call waits for its share: the sync loop must be running
        if self._nudge is not None:
            self._nudge.set()

    # -- feedback: kept for the host -------------------------------------------------------------

    def observe(self, status: int | None, headers: Mapping[str, str]) -> None:
        if self._alone:
            super().observe(status, headers)
            return
        self.responses += 1
        self._since_decrease += 1
        if status is None:
            return
        # The hints the controller reads (`Peer.observe` passes only those): sent to the host.
        self._answers.append([status, dict(headers)])
        # Pause this member at once; the host pauses the others at their next sync.
        self.pause_for(status, headers, time.monotonic())
        if status in RATE_LIMIT_STATUSES:
            self.rate_limited += 1
            # Halve this member's share at once, as the host will halve the window (refused calls
            # retry after a short `Retry-After`, sooner than a sync may come back) — once per
            # share of answers, as a local controller halves once per window.
            if not self._cut or self._since_decrease >= self._outstanding:
                self._cut = True
                self.limit = max(1.0, float(int(self.limit * DECREASE)))
                self._outstanding, self._since_decrease = self.in_flight, 0
            if self._nudge is not None:
                self._nudge.set()
        self._sample()

    # -- the sync loop ---------------------------------------------------------------------------

    def _ensure_syncing(self) -> None:
        """Run the sync loop on the running event loop (a run's loop may end; a later one starts
        it again)."""
        if self._alone:
            return
        loop = asyncio.get_running_loop()
        if self._task is not None and not self._task.done() and self._task.get_loop() is loop:
            return
        self._nudge = asyncio.Event()
        self._reporting = asyncio.Lock()
        self._task = loop.create_task(self._sync_loop(), name=f"rate-share {self.name}")

    async def _sync_loop(self) -> None:
        nudge = self._nudge
        assert nudge is not None
        try:
            while not self._alone:
                if not await self._report():
                    await asyncio.sleep(SYNC_S)
                busy = self.in_flight or self.waiting
                # asyncio.timeout, not wait_for: 3.11's wait_for can swallow a cancellation.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._sync.period_s if busy else IDLE_SYNC_S):
                        await nudge.wait()
                nudge.clear()
        except asyncio.CancelledError:
            # The loop is ending under us: no more network here (the host forgets this member
            # after MEMBER_TTL_S; a run that ends normally has left already: `aclose`).
            self._sync.abort()
            raise

    async def _report(self) -> bool:
        """One report and its grant, one at a time; False when the host could not be reached."""
        assert self._reporting is not None
        async with self._reporting:
            return await self._sync_once()

    async def _sync_once(self) -> bool:
        answers, self._answers = self._answers, []
        report = {
            "member": self._member,
            "ceiling": self.ceiling,
            "rpm": self.rpm,
            "tpm": self.tpm,
            "in_flight": self.in_flight,
            "waiting": self.waiting,
            "quota": int(self.limit),  # the share it admits calls to until the grant comes
            "paced": self._waited,  # a call waited for its turn at the granted rpm
            "answers": answers,
        }
        self._waited = False
        try:
            grant = await self._sync(self.name, report)
        except OSError as exc:  # the host is down or unreachable: keep the last share a while
            self._answers = answers + self._answers
            now = time.monotonic()
            self._unreachable_since = self._unreachable_since or now
            if now - self._unreachable_since > _FALLBACK_AFTER_S:
                logger.warning(
                    "rate control of %s: the %s host is unreachable (%s); this process controls "
                    "its own calls from now on",
                    self.name,
                    self.share,
                    exc,
                )
                self._alone = True
                self.limit = max(1.0, self.limit)
                self._wake()
            return False
        self._unreachable_since = None
        # A refusal that came after this report was sent is not in this grant: the share cut
        # for it stands until the next.
        reported = any(status in RATE_LIMIT_STATUSES for status, _ in answers)
        self._apply(grant, keep_cut=self._cut and not reported)
        return True

    def _apply(self, grant: Mapping[str, Any], *, keep_cut: bool = False) -> None:
        """Take the host's grant (`keep_cut`: no more than the share cut since the report)."""
        now = time.monotonic()
        quota = float(grant["quota"])
        self.limit = min(self.limit, quota) if keep_cut else quota
        self._cut = keep_cut
        self.window = float(grant["window"])
        self.members = int(grant["members"])
        self.most_members = max(self.most_members, self.members)
        self._granted = (grant.get("rpm"), grant.get("tpm"))
        self._fleet_pace = (grant.get("learned_rpm"), grant.get("announced_rpm"))
        if grant["pause_s"] > 0:
            self._pause_until(now, now + float(grant["pause_s"]))
        self._sample()
        self._wake()

    async def aclose(self) -> None:
        """This process's calls are done: report the answers not yet reported and hand its share
        back to the fleet at once (a later call joins again), so the fleet's controller counts
        every answer when the run reads it. A member another run still calls through (the runs
        of one Dask worker share it) only reports: the host counts its calls in flight."""
        task, reporting = self._task, self._reporting
        if self.in_flight or self.waiting:
            if task is not None and not task.done() and reporting is not None:
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(_LEAVE_TIMEOUT_S):
                        await self._report()
            return
        self._task = None
        if task is not None and not task.done():
            assert reporting is not None
            async with reporting:  # not in the middle of a report: its answers went, or are here
                task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._alone:
            self._wake()
            return
        answers, self._answers = self._answers, []
        try:
            async with asyncio.timeout(_LEAVE_TIMEOUT_S):
                await self._sync(self.name, {"member": self._member, "leaving": True, "answers": answers})
        except (OSError, TimeoutError) as exc:  # the host forgets a silent member after MEMBER_TTL_S anyway
            logger.debug("rate control of %s: could not leave the fleet: %s", self.name, exc)
        self._sync.abort()
        self.limit = 0.0  # the host gave this share away: a later call waits for a new grant
        self._wake()  # a call that began waiting meanwhile starts the sync loop again

    def summary(self) -> dict[str, Any]:
        summary = {**super().summary(), "members": self.most_members}
        if not self._alone:  # the pace is the fleet's, learned by the host
            learned, announced = self._fleet_pace
            summary.update(learned_rpm=round(learned, 1) if learned else None, announced_rpm=announced)
        return summary

    def window_limit(self) -> float:
        # The history shows the fleet's window; this member's share (`limit`) admits its calls.
        return self.limit if self._alone else self.window
