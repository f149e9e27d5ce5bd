"""Store: where results live — Parquet datasets hive-partitioned by run id, files never changed.

    local      `Store`: the datasets' layout, the staged commit of a batch (items last, the
               commit marker), run records as revisions, and its datasets read (Polars)
    lease      `Lease`: one process drives a run at a time; a paused one is fenced out
    labels     human labels of a run's outputs: written as revisions, read with staleness
               (the output changed since it was judged), for agreement and corrected estimates
    executions `ShardExecution`: Dask workers write a run under its driver's lease, each shard's
               executions fenced like leases, so a shard run twice commits each item once
    _location  `Location`: what the store needs of where its bytes live (list, read, put-if-absent,
               publish a batch, artifacts), and which roots can be a store (`root_problem`)
    _folder    a local folder as a location;  _bucket  an s3:// bucket prefix (obstore);
    _spool     artifacts on object storage: written locally, uploaded per attempt
    _publish   the file steps under them: staging, fault injection;  _revisions  records as revisions
    _reading   the readers of parts under today's schema (also files an older Assay wrote), the
               meaning of a column added later, an item's current row among its retries
    _copies    local copies of an object store's parts (immutable), fetched once, capped, for a
               reader that reads the same parts again and again (`assay view`)

`local.py` draws the commit protocol and how it maps onto object storage; `lease.py` the lease's.
"""

from assay.store._location import root_problem
from assay.store._reading import current_items, stored_form
from assay.store.lease import Lease, lease_ttl, part_generation
from assay.store.local import DEFAULT_ROOT, STAGING, Store, default_root

__all__ = [
    "DEFAULT_ROOT",
    "STAGING",
    "Lease",
    "Store",
    "current_items",
    "default_root",
    "lease_ttl",
    "part_generation",
    "root_problem",
    "stored_form",
]
