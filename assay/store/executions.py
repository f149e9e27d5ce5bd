"""Shard executions: several processes write parts of one run, each item still committed once.

On a Dask cluster (`assay run --dask`, docs/scale.md) the driver holds the run's lease
(`assay/store/lease.py`) and workers execute its shards and commit their parts themselves. A shard
can be executed more than once: Dask runs it again elsewhere when its worker died or was cut off
(a cut-off worker may still be running it). So each execution of a shard is fenced
the way a new lease holder fences the old one, one level down:

    <store>/leases/run_id=<id>/shards/g<generation>-s<shard>/<execution>.json

- **Begin**: list the shard's committed items parts of this generation, then create the next
  execution's record (put-if-absent: of two executions one gets each number) naming them `accepted`.
  It executes the shard's items not in those parts.
- **Commit**: its parts are named `part-<shard>-g<generation>-a<execution>-<random>`. Before and
  after each commit it checks that the driver still holds the lease (the record's token is the
  driver's, not released: `FollowedLease`) and that no later execution of the shard began. If a
  later one began, it stops; a part it committed meanwhile is removed unless the later execution
  accepted it.
- **Sweep** (`sweep_executions`, when the run closes and before a resume recovers it): in each
  shard, the newest execution's parts and the parts it accepted are the shard's rows; every other
  execution's parts of the shard — a part committed after the newest execution listed the shard, a
  killed execution's scores part without its items part, its staged batches — are removed.

Each item of a shard therefore appears once in {newest execution's parts + those it accepted}: an
execution runs only items outside its accepted parts, and commits each of those once. A killed
driver is a killed lease holder: `assay resume` takes the run over (a new generation) after
sweeping, so its fence sees each shard's rows once.
"""

from __future__ import annotations

import json
import re
import uuid

from assay.errors import LeaseLostError
from assay.store.lease import Lease
from assay.store.local import Store

_EXECUTION = re.compile(r"^(\d+)\.json$")
_SHARD = re.compile(r"^g(\d+)-s(\d+)$")
_EXECUTION_PART = re.compile(r"^part-(\d+)-g(\d+)-a(\d+)-")


def _folder(run_id: str) -> str:
    return f"leases/run_id={run_id}/shards"


def _shard_key(generation: int, shard: int) -> str:
    return f"g{generation:06d}-s{shard:05d}"


class FollowedLease(Lease):
    """The driver's lease, as a worker sees it: never acquired, renewed or released here; the run
    is held while the newest record is the driver's (its token) and not released.

    Args:
        store: the store holding the run.
        run_id: the run.
        token: the driver's holder token.
        generation: the driver's generation (every part a worker commits carries it).
    """

    def __init__(self, store: Store, run_id: str, token: str, generation: int) -> None:
        super().__init__(store, run_id)
        self.holder["token"] = token
        self.generation = generation

    def _ours(self, held: dict) -> bool:
        # A released record is the driver's last: the run is no longer being driven.
        return super()._ours(held) and not held.get("released")


class ShardExecution:
    """One execution of one shard of a run driven by another process (the protocol is in the
    module's docstring). `ShardExecutor.run_shard` commits through it (`check`, `part_name`,
    `after_commit`), as it does through a `Lease`.

    Args:
        lease: the driver's lease as this process follows it.
        shard: the shard's index.
    """

    def __init__(self, lease: FollowedLease, shard: int) -> None:
        self.lease = lease
        self.shard = shard
        self.number = 0
        self.accepted: set[str] = set()
        # Its own: a superseded execution stops, the run's other shards in this process go on.
        self.superseded: LeaseLostError | None = None
        self._location = lease.store.location
        self._folder = f"{_folder(lease.run_id)}/{_shard_key(lease.generation, shard)}"

    def _numbers(self) -> list[int]:
        names = self._location.names(self._folder)
        return sorted(int(match[1]) for name in names if (match := _EXECUTION.match(name)))

    def begin(self) -> set[str]:
        """List the shard's committed items parts, then take the next execution's number with them
        as `accepted`; returns them (the items parts this execution does not execute again)."""
        self.lease.check()
        prefix = f"part-{self.shard:05d}-g{self.lease.generation:06d}-"
        self.accepted = {n for n in self.lease.store.part_names(self.lease.run_id) if n.startswith(prefix)}
        document = json.dumps({"accepted": sorted(self.accepted)}).encode()
        staging = f".staging/run_id={self.lease.run_id}"
        number = (self._numbers() or [0])[-1] + 1
        while not self._location.create(f"{self._folder}/{number:06d}.json", document, staging):
            number += 1  # another execution took this number at the same moment
        self.number = number
        return self.accepted

    def part_name(self, shard: int) -> str:
        """A new part's name: the shard, the driver's generation, this execution, random."""
        return f"part-{shard:05d}-g{self.lease.generation:06d}-a{self.number:06d}-{uuid.uuid4().hex[:12]}"

    def check(self) -> None:
        """Before a commit: the driver still holds the run and no later execution began."""
        self.lease.check()
        self._check_newest()

    def after_commit(self, part: str) -> None:
        """After committing `part`: as `Lease.after_commit`, and if a later execution began
        meanwhile, remove the part unless that execution accepted it, and stop."""
        self.lease.after_commit(part)
        later = [n for n in self._numbers() if n > self.number]
        if later:
            if part not in self._accepted_by(later[-1]):
                self.lease.store.remove_parts(self.lease.run_id, {part})
            self._check_newest()

    def _accepted_by(self, number: int) -> set[str]:
        return set(json.loads(self._location.read(f"{self._folder}/{number:06d}.json"))["accepted"])

    def _check_newest(self) -> None:
        if self.superseded is None:
            newest = self._numbers()[-1]
            if newest == self.number:
                return
            self.superseded = LeaseLostError(
                self.lease.run_id,
                f"shard {self.shard} of run {self.lease.run_id} is taken over by a later execution "
                f"({newest}, this one is {self.number}): this execution commits nothing more",
            )
        raise self.superseded


def sweep_executions(store: Store, run_id: str) -> int:
    """Keep, in each shard executed more than once, only the newest execution's parts and those it
    accepted; remove the other executions' parts and staged batches. Returns how many it removed.
    Call it holding the run's lease (at close, or before a resume's `recover`)."""
    location = store.location
    folder = _folder(run_id)
    keep: dict[tuple[int, int], tuple[int, set[str]]] = {}
    for shard_key in location.names(folder):
        match = _SHARD.match(shard_key)
        numbers = sorted(
            int(m[1]) for name in location.names(f"{folder}/{shard_key}") if (m := _EXECUTION.match(name))
        )
        if match is None or not numbers:
            continue
        record = json.loads(location.read(f"{folder}/{shard_key}/{numbers[-1]:06d}.json"))
        keep[(int(match[1]), int(match[2]))] = (numbers[-1], set(record["accepted"]))
    if not keep:
        return 0

    def stale(name: str) -> bool:
        match = _EXECUTION_PART.match(name)
        if match is None:
            return False
        newest = keep.get((int(match[2]), int(match[1])))
        return newest is not None and int(match[3]) != newest[0] and name not in newest[1]

    names = set().union(
        *(store.part_names(run_id, dataset) for dataset in ("items", "scores", "requests", "turns"))
    )
    removed = {name for name in names if stale(name)}
    store.remove_parts(run_id, removed)
    staging = f".staging/run_id={run_id}"
    batches = [
        batch for batch, _ in location.staged_batches(staging) if stale(batch.rsplit("/", 1)[-1] + ".parquet")
    ]
    for batch in batches:
        location.delete_tree(batch)
    return len(removed) + len(batches)
