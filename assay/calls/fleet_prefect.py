"""The fleet's rate controllers shared through a Prefect server (`ASSAY_RATE_SHARE=prefect`: the
server `PREFECT_API_URL` names), with its global concurrency limits (GCLs).

A Prefect server cannot run the AIMD rules, so each member runs them on its own answers against
the window the server holds (docs/rate-control.md), and the server enforces the window:

- the fleet's window is the `limit` of a GCL, `assay-rate-<hash of endpoint and model>`. A member
  replays its answers into a `RateController` set to that window (slow start, halving on a 429
  once per its own window, additive increase, the server's remaining count) and writes the window
  back when its integer part moves;
- a member's share is the GCL's slots it holds, leased in blocks (`increment-with-lease`,
  renewed every `RENEW_S`, released when no longer needed): the server admits a block only while
  the slots held across the fleet stay within the limit, so the calls in flight across the fleet
  stay within the window. No request pays a round trip: a member syncs once per `PERIOD_S`;
- a member that halves the window writes the pause its refusal asked for (wall-clock time) and
  the slow-start threshold to a Prefect Variable of the same hash; the others read it when they
  see the window fall;
- the members are counted by a second GCL (`…-members`) on which each holds one leased slot, and
  the members short of their fair share (window / members) while no slot is free by a third
  (`…-short`): while one is short, a member holding more than its fair share gives the excess
  back (both counts are read every `MEMBERS_EVERY_S`);
- `rpm` / `tpm` are divided as the window is: a member paces to its slots' fraction of it.

Limits of this design (docs/rate-control.md): the window is written without compare-and-set, so
two members moving it at once may lose one's step; leases last at least 60 s (the server's
minimum), so a member killed without leaving holds its slots until its leases expire; pauses are
compared on wall clocks.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
import time
from dataclasses import dataclass, field
from typing import Any

import httpx
from prefect.client.orchestration import PrefectClient, get_client

from assay.calls.aimd import START_WINDOW, RateController, lower

PERIOD_S = 0.25  # a member's sync period while it calls: one GET of the window (~10 ms) at least
LEASE_S = 60.0  # the shortest lease the server grants
RENEW_S = 20.0  # a lease is renewed when this old
MEMBERS_EVERY_S = 1.0  # how often a member counts the others
_COUNT = 1_000_000  # the limit of a GCL that counts members, not limits them
# A sync on a loaded SQLite server may wait out Prefect's client retrying its 503s ("database is
# locked") for seconds; the member keeps its share meanwhile, and falls back after 10 s without one.
_TIMEOUT_S = 10.0
_LOCKED = 423  # the server's answer when a block would exceed the limit
# A member's slots are leased in blocks of at most window / BLOCKS: a lease is released whole, so
# a member gives back all but less than a block of what it no longer needs.
BLOCKS = 4


def limit_names(name: str) -> tuple[str, str, str, str]:
    """The window's GCL, the members' and the short members' GCLs and the pause's Variable for
    endpoint `name`.

    Args:
        name: `<base_url> <model>` (hashed: URLs are not valid GCL or Variable names).
    """
    digest = hashlib.sha256(name.encode()).hexdigest()[:16]
    gcl = f"assay-rate-{digest}"
    return gcl, f"{gcl}-members", f"{gcl}-short", f"assay_rate_{digest}"


@dataclass
class _Lease:
    id: str
    slots: int
    renewed: float = field(default_factory=time.monotonic)


@dataclass
class _Seat:
    """This member's place at one endpoint's window."""

    window_gcl: str
    members_gcl: str
    short_gcl: str
    variable: str
    mirror: RateController
    presence: _Lease | None = None
    short: _Lease | None = None  # held while this member is short of its fair share
    leases: list[_Lease] = field(default_factory=list)
    known: int = 0  # the window as this member last read or wrote it
    members: int = 1
    others_short: int = 0
    counted: float = 0.0
    paused_until: float = 0.0  # wall clock: the fleet's pause as the Variable said

    @property
    def held(self) -> int:
        return sum(lease.slots for lease in self.leases)


class PrefectLink:
    """A member's way to the Prefect server: `await link(name, report)` -> the grant
    (`assay.calls.fleet.Link`; the grant is computed here, the server holds the shared state).
    Raises ConnectionError when the server cannot be reached or fails."""

    period_s = PERIOD_S

    def __init__(self) -> None:
        self._client: PrefectClient | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._seats: dict[str, _Seat] = {}

    async def _connect(self) -> PrefectClient:
        # An httpx client belongs to the loop that opened it: a new loop (a later run) opens its own.
        loop = asyncio.get_running_loop()
        if self._client is None or self._loop is not loop:
            self._client = await get_client().__aenter__()
            self._loop = loop
        return self._client

    @property
    def url(self) -> str:
        from prefect.settings import PREFECT_API_URL

        return str(PREFECT_API_URL.value())

    async def __call__(self, name: str, report: dict[str, Any]) -> dict[str, Any]:
        try:
            async with asyncio.timeout(_TIMEOUT_S):
                client = await self._connect()
                if report.get("leaving"):
                    await self._leave(client, name)
                    return {}
                return await self._sync(client, name, report)
        except (httpx.HTTPError, TimeoutError) as exc:
            raise ConnectionError(f"Prefect server {self.url}: {exc!r}") from exc

    def abort(self) -> None:
        client, self._client = self._client, None
        loop = self._loop
        if client is not None and loop is not None and not loop.is_closed():
            # Closed on its own loop, not awaited: `abort` runs while that loop is being cancelled.
            loop.create_task(client.__aexit__(None, None, None))

    # -- one sync --------------------------------------------------------------------------------

    async def _sync(self, client: PrefectClient, name: str, report: dict[str, Any]) -> dict[str, Any]:
        seat = self._seats.get(name) or await self._join(client, name, int(report["ceiling"]))
        self._seats[name] = seat
        if seat.presence is None:  # apart from joining: a sync cut short retries only this
            seat.presence = await _take(client, seat.members_gcl, 1)
        now, wall = time.monotonic(), time.time()
        gcl = await _read_limit(client, seat.window_gcl)
        window = await self._move_window(client, seat, int(gcl["limit"]), report, now)
        if now - seat.counted >= MEMBERS_EVERY_S:
            seat.members = max(1, int((await _read_limit(client, seat.members_gcl))["active_slots"]))
            short = int((await _read_limit(client, seat.short_gcl))["active_slots"])
            seat.others_short = short - (seat.short is not None)
            seat.counted = now
        quota = await self._lease(client, seat, int(gcl["active_slots"]), window, report)
        await self._renew(client, seat, now)
        fraction = quota / window
        rpm, tpm = report.get("rpm"), report.get("tpm")
        rpm = rpm * fraction if rpm else None
        # The pace the mirror learned from this member's own answers is already its part.
        learned = seat.mirror.pace.rpm
        return {
            "quota": quota,
            "window": seat.mirror.limit,
            "pause_s": max(seat.mirror.pause_left(now), seat.paused_until - wall),
            "rpm": lower(rpm, learned),
            "tpm": tpm * fraction if tpm else None,
            "members": seat.members,
            "rate_limited": seat.mirror.rate_limited,
            "learned_rpm": learned,
            "announced_rpm": seat.mirror.pace.announced,
        }

    async def _move_window(
        self, client: PrefectClient, seat: _Seat, served: int, report: dict[str, Any], now: float
    ) -> int:
        """Replay the member's answers into the window the server holds; write it back if it
        moved (and, if it was halved, the pause). The window after them.

        Args:
            served: the GCL's limit as read this sync.
            report: the member's report (`ceiling`, `in_flight`, `answers`).
            now: this sync's monotonic time.
        """
        mirror = seat.mirror
        if served < seat.known:  # another member halved it: learn its pause and threshold
            await self._read_pause(client, seat)
        if int(mirror.limit) != served:
            mirror.limit = float(served)
        # A member asking a lower ceiling must not pull down a window a wider one grew.
        mirror.ceiling = max(int(report["ceiling"]), served)
        answers = report.get("answers", ())
        # The calls answered since the last sync were in flight too: refusals among them count
        # as one decrease, as refusals of calls in flight at a decrease do.
        mirror.in_flight = int(report["in_flight"]) + len(answers)
        refused = mirror.rate_limited
        if report.get("paced"):
            mirror.waited_for_turn()
        for status, headers in answers:
            mirror.observe(status, headers)
        window = max(1, int(mirror.limit))
        if window != served:
            await client.request(
                "PATCH",
                "/v2/concurrency_limits/{id_or_name}",
                path_params={"id_or_name": seat.window_gcl},
                json={"limit": window},
            )
            if mirror.rate_limited > refused and window < served:
                await self._write_pause(client, seat, time.time() + mirror.pause_left(now))
        seat.known = window
        return window

    async def _lease(
        self, client: PrefectClient, seat: _Seat, active: int, window: int, report: dict[str, Any]
    ) -> int:
        """Hold the slots this member should have; the calls it may have in flight back.

        Args:
            active: the window's slots held by every member, as read this sync.
            window: the window after this sync's answers.
            report: the member's report (`in_flight`, `waiting`, `ceiling`, `quota`).
        """
        in_flight = int(report["in_flight"])
        demand = min(int(report["ceiling"]), in_flight + int(report["waiting"]), window)
        held = seat.held
        free = max(0, window - active)
        fair = max(1, window // seat.members)
        target = demand
        if seat.others_short > 0 and held > fair:
            target = min(target, fair)  # another member waits for its share: give back the excess
        # Slots of calls still in flight stay held, and so do those of the share the member admits
        # calls to until this grant reaches it (`quota`): the window counts them until they end.
        keep = max(target, in_flight, int(report.get("quota", 0)))
        if held > keep:
            await self._release_down_to(client, seat, keep)
        held = seat.held
        if held < target and free:
            await self._acquire(client, seat, min(target - held, free), window)
        short = seat.held < min(target, fair) and not free
        if short and seat.short is None:
            seat.short = await _take(client, seat.short_gcl, 1)
        elif not short and seat.short is not None:
            lease, seat.short = seat.short, None
            await _release(client, lease)
        return min(target, seat.held)

    async def _acquire(self, client: PrefectClient, seat: _Seat, slots: int, window: int) -> None:
        """Lease `slots` more slots, in blocks of at most `window / BLOCKS`, one after another:
        a SQLite-backed server answers concurrent writes "database is locked" (503), which its
        client retries after seconds."""
        block = max(1, window // BLOCKS)
        for size in [block] * (slots // block) + ([slots % block] if slots % block else []):
            await self._acquire_block(client, seat, size)

    async def _acquire_block(self, client: PrefectClient, seat: _Seat, slots: int) -> None:
        try:
            seat.leases.append(await _take(client, seat.window_gcl, slots))
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != _LOCKED:
                raise
            # Taken by another member since the read: try again next sync.

    async def _release_down_to(self, client: PrefectClient, seat: _Seat, keep: int) -> None:
        """Release whole leases, largest first, while at least `keep` slots stay held (what is
        left over is less than a block)."""
        going = []
        held = seat.held
        for lease in sorted(seat.leases, key=lambda lease: -lease.slots):
            if held - lease.slots >= keep:
                going.append(lease)
                held -= lease.slots
        for lease in going:  # one after another, as `_acquire` does
            seat.leases.remove(lease)
            await _release(client, lease)

    async def _renew(self, client: PrefectClient, seat: _Seat, now: float) -> None:
        for lease in [*seat.leases, *_flags(seat)]:
            if now - lease.renewed >= RENEW_S:
                await client.renew_concurrency_lease(lease.id, LEASE_S)  # type: ignore[arg-type]
                lease.renewed = now

    # -- joining and leaving ---------------------------------------------------------------------

    async def _join(self, client: PrefectClient, name: str, ceiling: int) -> _Seat:
        window_gcl, members_gcl, short_gcl, variable = limit_names(name)
        made = ((window_gcl, min(ceiling, START_WINDOW)), (members_gcl, _COUNT), (short_gcl, _COUNT))
        for gcl, limit in made:
            try:
                await client.request("POST", "/v2/concurrency_limits/", json={"name": gcl, "limit": limit})
            except httpx.HTTPStatusError as exc:
                if exc.response.status_code != 409:  # 409: it exists, made by another member
                    raise
        seat = _Seat(window_gcl, members_gcl, short_gcl, variable, RateController(name, ceiling))
        await self._read_pause(client, seat)  # a member joining after a halving starts past slow start
        seat.known = int((await _read_limit(client, window_gcl))["limit"])
        return seat

    async def _leave(self, client: PrefectClient, name: str) -> None:
        seat = self._seats.pop(name, None)
        if seat is None:
            return
        for lease in [*seat.leases, *_flags(seat)]:
            await _release(client, lease)

    # -- the pause -------------------------------------------------------------------------------

    async def _read_pause(self, client: PrefectClient, seat: _Seat) -> None:
        variable = await client.read_variable_by_name(seat.variable)
        if variable is None or not isinstance(variable.value, dict):
            return
        seat.paused_until = float(variable.value.get("paused_until", 0.0))
        seat.mirror.threshold = min(seat.mirror.threshold, float(variable.value.get("threshold", math.inf)))

    async def _write_pause(self, client: PrefectClient, seat: _Seat, until: float) -> None:
        value = {"paused_until": until, "threshold": seat.mirror.threshold}
        seat.paused_until = max(seat.paused_until, until)
        try:
            await client.request(
                "PATCH", "/variables/name/{name}", path_params={"name": seat.variable}, json={"value": value}
            )
        except httpx.HTTPStatusError as exc:
            if exc.response.status_code != 404:
                raise
            try:
                await client.request("POST", "/variables/", json={"name": seat.variable, "value": value})
            except httpx.HTTPStatusError as again:
                if again.response.status_code != 409:  # 409: another member made it meanwhile
                    raise


async def _read_limit(client: PrefectClient, gcl: str) -> dict[str, Any]:
    response = await client.request(
        "GET", "/v2/concurrency_limits/{id_or_name}", path_params={"id_or_name": gcl}
    )
    return dict(response.json())


async def _take(client: PrefectClient, gcl: str, slots: int) -> _Lease:
    """Lease `slots` slots of `gcl` for `LEASE_S`; an HTTPStatusError 423 when the limit has not
    that many free."""
    response = await client.request(
        "POST",
        "/v2/concurrency_limits/increment-with-lease",
        json={"names": [gcl], "slots": slots, "mode": "concurrency", "lease_duration": LEASE_S},
    )
    return _Lease(str(response.json()["lease_id"]), slots)


def _flags(seat: _Seat) -> list[_Lease]:
    """The seat's leases on the counting GCLs."""
    return [lease for lease in (seat.presence, seat.short) if lease is not None]


async def _release(client: PrefectClient, lease: _Lease) -> None:
    await client.request("POST", "/v2/concurrency_limits/decrement-with-lease", json={"lease_id": lease.id})
