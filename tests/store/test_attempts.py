"""Shard executions (assay/store/executions.py): several processes writing one run's parts under its
driver's lease, in a real store folder. A shard executed twice keeps each part once; a superseded
execution stops without stopping the run's other shards; a released lease stops every worker."""

from __future__ import annotations

import pytest

from assay.errors import LeaseLostError
from assay.store import Store
from assay.store.executions import FollowedLease, ShardExecution, sweep_executions
from assay.store.lease import Lease

RUN = "20261130T000000-abcdef"


def _commit(store: Store, execution: ShardExecution, shard: int) -> str:
    """What `_Batch._write` does around a commit, with a stand-in part (its bytes are not read)."""
    execution.check()
    part = f"{execution.part_name(shard)}.parquet"
    for dataset in ("scores", "items"):  # the items part last, as a commit
        store.location.write(f"{dataset}/run_id={RUN}/{part}", b"part")
    execution.after_commit(part)
    return part


@pytest.fixture
def driven(tmp_path) -> tuple[Store, Lease, FollowedLease]:
    store = Store(tmp_path / "store")
    driver = Lease(store, RUN)
    driver.acquire()
    return store, driver, FollowedLease(store, RUN, driver.holder["token"], driver.generation)


def test_a_shard_run_twice_keeps_each_part_once_and_the_stale_execution_stops(driven):
    store, _, followed = driven
    first = ShardExecution(followed, 3)
    assert first.begin() == set()
    kept = _commit(store, first, 3)

    # Dask runs the shard again (its worker was cut off): the new execution takes what is committed.
    second = ShardExecution(FollowedLease(store, RUN, followed.holder["token"], followed.generation), 3)
    assert second.begin() == {kept}
    # The first execution, still running, commits once more: found superseded after its commit,
    # the part is removed (the second execution did not accept it) and it stops.
    stale = f"{first.part_name(3)}.parquet"
    store.location.write(f"items/run_id={RUN}/{stale}", b"part")
    with pytest.raises(LeaseLostError, match="later execution"):
        first.after_commit(stale)
    assert stale not in store.part_names(RUN)
    with pytest.raises(LeaseLostError, match="later execution"):
        first.check()
    # The first execution's process goes on with the run's other shards.
    other = ShardExecution(followed, 4)
    other.begin()
    other_part = _commit(store, other, 4)

    redone = _commit(store, second, 3)
    # A part the first execution committed after the second listed the shard, and its check found
    # no later execution yet: left for the sweep, as is a killed execution's scores part.
    late = f"{first.part_name(3)}.parquet"
    store.location.write(f"items/run_id={RUN}/{late}", b"part")
    orphan = f"{first.part_name(3)}.parquet"
    store.location.write(f"scores/run_id={RUN}/{orphan}", b"part")
    assert sweep_executions(store, RUN) == 2
    assert store.part_names(RUN) == {kept, redone, other_part}
    assert store.part_names(RUN, "scores") == {kept, redone, other_part}


def test_a_released_or_taken_over_lease_stops_every_worker(driven):
    store, driver, followed = driven
    execution = ShardExecution(followed, 0)
    execution.begin()
    _commit(store, execution, 0)
    driver.release()  # the driver ended (cancelled, say): workers commit nothing more
    with pytest.raises(LeaseLostError):
        execution.check()
    with pytest.raises(LeaseLostError):
        ShardExecution(FollowedLease(store, RUN, driver.holder["token"], 1), 1).begin()
