"""Leases: one process drives a run at a time, and a process that lost its run stops.

A run's lease is a log of small JSON records in `<store>/leases/run_id=<id>/` (a local folder or
an object-store prefix: `Store.location`), numbered
`000000000001.json`, `000000000002.json`, … The newest record says who drives the run: its holder
(host, pid, Prefect flow run, a random token), its `generation` (the number of the record with
which that holder took the run), when it was last `renewed` (wall time), its `ttl` and whether it
was `released`.

Every write of the protocol *creates* a file that must not exist yet — a put-if-absent, which one
writer alone can win. On a local folder that is `os.link` of a complete temporary file (it fails
when the name exists, and no reader ever sees half a record); on object storage it is a PUT with
`If-None-Match: *` (answered 412 when the key exists: `assay/store/_location.py`). Nothing is renamed over, overwritten or locked.

- **Acquire**: read the newest record, number n. If it is live — renewed less than its `ttl` ago,
  not released, not a process on this host that no longer exists, not an earlier attempt of this
  Prefect flow run — the run is held: refused, naming the holder. Otherwise create record n + 1.
  Of two processes that both read n, exactly one creates n + 1; the other is refused.
- **Renew** (every `ttl` / 4: 15 s of the default 60 s): if the newest record is not ours, the
  lease is lost. Otherwise create the next record (same generation, new `renewed`); a renewal and
  a takeover race for the same number, so only one of them succeeds. Older records are then
  deleted — never the newest, so a number is never reused.
- **Check** before every commit and again after it (below). A holder that finds a newer holder's
  record has lost the lease: it cancels its work, starts no more items, commits nothing more,
  writes nothing to the run's record (the new holder owns it) and ends with `LeaseLostError`.
- **Release**: a last record with `released: true`.

**Fencing.** A holder can be paused (SIGSTOP, a paused VM, a long GC pause) between its check and
its commit for longer than its lease's time to live, and commit after another process took over.
So every part's name carries its writer's generation (`part-<shard>-g<generation>-<random>`), and
a holder, once it has the lease and before it reads which items are done, creates
`fence-<generation>.json`: the parts of earlier generations it takes over as committed — those it
finds, less those the previous fence left out. It resumes from exactly those parts. A part of an
earlier generation that the newest fence leaves out was committed after that takeover: a
duplicate of work the new holder does again. The new holder removes such parts before it closes
the run, and a stale writer that finds after a commit that it lost the lease removes its part
itself when a later fence leaves it out (with no later fence yet, the new holder has not listed
the parts: it will find this one and keep it).

What this guarantees: each item x trial is committed once, whatever the pauses, unless a stale
writer commits after the new holder closed the run *and* is killed before its check right after
that commit; the next resume then removes the part. The run's record is written by the holder
just after renewing its lease: a process paused longer than `ttl` inside those few milliseconds
could still overwrite it (a conditional write of the record on object storage would close that).
Takeover compares this host's clock with the holder's `renewed` stamp, so hosts sharing a store
need clocks that agree to within a small part of the ttl.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from typing import Any

from assay.errors import LeaseLostError, RunHeldError, StoreError
from assay.settings import settings
from assay.store.local import Store

RENEWALS_PER_TTL = 4
_RECORD = re.compile(r"^(\d+)\.json$")
_FENCE = re.compile(r"^fence-(\d+)\.json$")
_PART_GENERATION = re.compile(r"^part-\d+-g(\d+)-")
_DATASETS = ("items", "scores", "requests", "turns")
_log = logging.getLogger(__name__)


def lease_ttl() -> float:
    """A lease's time to live in seconds: `ASSAY_LEASE_TTL_S`, default 60."""
    return settings().lease_ttl_s


def part_generation(name: str) -> int | None:
    """The lease generation a part's file name carries; None for a part written without one
    (by an older Assay, or a rescore's carried requests), which fencing leaves alone."""
    match = _PART_GENERATION.match(name)
    return int(match[1]) if match else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Lease:
    """This process's hold on one run (the protocol is in the module's docstring).

    Args:
        store: the store holding the run.
        run_id: the run.
        flow_run_id: the Prefect flow run driving it, if any.

    Attributes:
        generation: the number of the record with which this process took the run (0 before).
        accepted: the committed parts this holder took over (file names): every part without a
            generation, and the earlier generations' parts that `take_over_parts` accepted.
        lost: the error this holder ends with once another process took the run over.
    """

    def __init__(self, store: Store, run_id: str, flow_run_id: str | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.folder = f"leases/run_id={run_id}"
        self._location = store.location
        self._staging = f".staging/run_id={run_id}"
        self.ttl = lease_ttl()
        self.holder = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "flow_run_id": flow_run_id,
            "token": uuid.uuid4().hex,
            "since": datetime.now(UTC).isoformat(),
        }
        self.generation = 0
        self.accepted: set[str] = set()
        self.lost: LeaseLostError | None = None

    # -- the log ------------------------------------------------------------------------------

    def _numbers(self, pattern: re.Pattern[str]) -> list[int]:
        names = self._location.names(self.folder)
        return sorted(int(match[1]) for name in names if (match := pattern.match(name)))

    def _newest(self) -> tuple[int, dict[str, Any]] | None:
        """The newest record and its number; None when the run has no lease yet."""
        for _ in range(10):
            numbers = self._numbers(_RECORD)
            if not numbers:
                return None
            path = f"{self.folder}/{numbers[-1]:012d}.json"
            try:
                return numbers[-1], json.loads(self._location.read(path))
            except FileNotFoundError:
                continue  # its holder renewed and pruned it since the listing: list again
            except ValueError as exc:
                raise StoreError(f"{path} is not a lease record: {exc}") from None
        raise StoreError(f"the lease records in {self.folder} keep changing; cannot read the newest")

    def _record(self, *, released: bool = False) -> bytes:
        return json.dumps(
            {
                **self.holder,
                "generation": self.generation,
                "renewed": time.time(),
                "ttl": self.ttl,
                "released": released,
            }
        ).encode()

    def _append(self, number: int, *, released: bool = False) -> bool:
        """Create record `number` (a renewal or the release) and delete the records before it."""
        if not self._create(f"{number:012d}.json", self._record(released=released)):
            return False
        for older in self._numbers(_RECORD):
            if older < number:
                self._location.delete(f"{self.folder}/{older:012d}.json")
        return True

    def _create(self, name: str, data: bytes) -> bool:
        """Put-if-absent of a file of the lease's log: a hard link, or `If-None-Match: *`."""
        return self._location.create(f"{self.folder}/{name}", data, self._staging)

    def _ours(self, held: dict[str, Any]) -> bool:
        return held.get("token") == self.holder["token"]

    def _live(self, held: dict[str, Any]) -> bool:
        """Whether a record still holds the run against this process."""
        if held.get("released") or time.time() - held.get("renewed", 0) > held.get("ttl", self.ttl):
            return False
        if held.get("host") == self.holder["host"] and not _alive(int(held.get("pid", 0))):
            return False  # its process died on this host: no time to live to wait out
        flow_run = held.get("flow_run_id")
        return flow_run is None or flow_run != self.holder["flow_run_id"]  # a retry of the flow run

    # -- acquiring, renewing, releasing -------------------------------------------------------------

    def acquire(self) -> None:
        """Take the run, or raise `RunHeldError` naming who holds it."""
        newest = self._newest()
        number = newest[0] if newest else 0
        if newest is not None and self._live(newest[1]):
            raise RunHeldError(_held(self.run_id, newest[1]))
        self.generation = number + 1
        if not self._create(f"{number + 1:012d}.json", self._record()):
            self.generation = 0
            winner = self._newest()
            raise RunHeldError(
                _held(self.run_id, winner[1]) if winner else f"run {self.run_id} was taken at the same moment"
            )

    def renew(self) -> None:
        """Extend the lease; raises `LeaseLostError` if another process holds the run now."""
        newest = self._newest_ours()
        if not self._append(newest[0] + 1):
            raise self._lose(self._newest())  # a takeover created that number first

    def release(self) -> None:
        """Let the run go (a no-op when it was lost or never taken)."""
        if self.lost is not None or self.generation == 0:
            return
        newest = self._newest()
        if newest is not None and self._ours(newest[1]):
            self._append(newest[0] + 1, released=True)
        self.generation = 0

    def _lose(self, newest: tuple[int, dict[str, Any]] | None) -> LeaseLostError:
        if newest is None:
            who = "its lease records were deleted"
        else:
            held = newest[1]
            who = (
                f"{held.get('host')}:{held.get('pid')} took the run over at {held.get('since')}"
                + (f" (Prefect flow run {held['flow_run_id']})" if held.get("flow_run_id") else "")
                + (" and has since let it go" if held.get("released") else "")
                + f", after this process went {self.ttl:g} s without renewing its lease (it was"
                " paused or cut off), or by force"
            )
        self.lost = LeaseLostError(
            self.run_id,
            f"lost the lease on run {self.run_id}: {who}. This process stopped starting items and "
            f"committed nothing more; the run's record is the new holder's: `assay show {self.run_id}`",
        )
        return self.lost

    def check(self) -> None:
        """Before a commit: raise `LeaseLostError` if another process holds the run now."""
        self._newest_ours()

    def _newest_ours(self) -> tuple[int, dict[str, Any]]:
        """The newest record and its number, which must be ours: else the lease is lost (raised)."""
        if self.lost is not None:
            raise self.lost
        newest = self._newest()
        if newest is None or not self._ours(newest[1]):
            raise self._lose(newest)
        return newest

    # -- fencing -------------------------------------------------------------------------------

    def part_name(self, shard: int) -> str:
        """A new part's name (without `.parquet`): the shard, this holder's generation, random."""
        return f"part-{shard:05d}-g{self.generation:06d}-{uuid.uuid4().hex[:12]}"

    def _fence(self, generation: int) -> set[str]:
        document = json.loads(self._location.read(f"{self.folder}/fence-{generation:012d}.json"))
        return set(document["accepted"])

    def take_over_parts(self) -> set[str]:
        """Once the lease is taken, before reading which items are done: accept the committed
        parts of earlier generations, remove those committed after an earlier takeover, and write
        this generation's fence. Returns `accepted`: the items parts to resume from."""
        earlier = [g for g in self._numbers(_FENCE) if g < self.generation]
        fenced = earlier[-1] if earlier else 0
        previous = self._fence(fenced) if fenced else set()
        accepted, stale, plain = set(), set(), set()
        for name in self.store.part_names(self.run_id):
            generation = part_generation(name)
            if generation is None:
                plain.add(name)
            elif generation >= fenced or name in previous:
                accepted.add(name)
            else:
                stale.add(name)
        self.store.remove_parts(self.run_id, stale)
        document = {"generation": self.generation, "accepted": sorted(accepted)}
        self._create(f"fence-{self.generation:012d}.json", json.dumps(document).encode())
        self.accepted = accepted | plain
        return self.accepted

    def after_commit(self, part: str) -> None:
        """After committing the batch `part` (a file name): if another process took the run over
        meanwhile, remove the part unless a later fence accepted it, and raise `LeaseLostError`."""
        newest = self._newest()
        if newest is not None and self._ours(newest[1]):
            return
        later = [g for g in self._numbers(_FENCE) if g > self.generation]
        if later and part not in self._fence(later[-1]):
            self.store.remove_parts(self.run_id, {part})
        raise self._lose(newest)

    def sweep(self) -> None:
        """Before closing the run: remove the parts earlier generations committed after this
        holder took over (and their orphans), duplicates of work this holder did."""
        names = set().union(*(self.store.part_names(self.run_id, dataset) for dataset in _DATASETS))
        self.store.remove_parts(
            self.run_id,
            {
                name
                for name in names
                if (g := part_generation(name)) is not None
                and g < self.generation
                and name not in self.accepted
            },
        )

    # -- holding while the run executes ------------------------------------------------------------

    @asynccontextmanager
    async def holding(self) -> AsyncIterator[None]:
        """Renew the lease every ttl / 4 while the block runs. When it is lost, the block is
        cancelled and `LeaseLostError` raised in its place."""
        task = asyncio.current_task()
        assert task is not None

        async def renew() -> None:
            while True:
                await asyncio.sleep(self.ttl / RENEWALS_PER_TTL)
                try:
                    self.renew()
                except LeaseLostError:
                    task.cancel()
                    return
                except OSError as exc:  # the next renewal tries again; every commit is checked anyway
                    _log.warning("renewing the lease on run %s failed: %s", self.run_id, exc)

        renewer = asyncio.create_task(renew())
        try:
            yield
        except BaseException:
            if self.lost is None:
                raise
            if task.cancelling():
                task.uncancel()
            raise self.lost from None
        finally:
            renewer.cancel()
        if self.lost is not None:
            raise self.lost


def _held(run_id: str, held: dict[str, Any]) -> str:
    return (
        f"run {run_id} is held by {held.get('host')}:{held.get('pid')} since {held.get('since')}"
        + (f" (Prefect flow run {held['flow_run_id']})" if held.get("flow_run_id") else "")
        + f"; its lease expires {held.get('ttl', lease_ttl()):g} s after its last renewal"
    )
