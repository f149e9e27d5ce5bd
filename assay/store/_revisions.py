"""Records that change, as revisions: `<stem>-<n>.parquet`, each created put-if-absent, so two
writers never take one number (the second takes the next; see `assay/store/__init__.py`).

    write_revision(location, …)        a record's next revision
    write_revision_after(location, …)  the revision after the one a writer holds, if still free
    newest_revision(location, …)       the key of a record's highest revision
    newest_revisions(location, …)      each partition's highest revision, in one listing
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pyarrow as pa

from assay.store._location import Location

_REVISION = re.compile(r"-(\d+)")


def revision_of(name: str, stem: str) -> int | None:
    """`<stem>-<n>.parquet` is revision n; `<stem>.parquet`, from before revisions, is 0."""
    if not name.endswith(".parquet") or not name.startswith(stem):
        return None
    rest = name[len(stem) : -len(".parquet")]
    if not rest:
        return 0
    match = _REVISION.fullmatch(rest)
    return int(match.group(1)) if match else None


def revisions(location: Location, folder: str, stem: str) -> dict[int, str]:
    """The record's keys in `folder` by revision."""
    found = {}
    for name in location.names(folder):
        revision = revision_of(name, stem)
        if revision is not None:
            found[revision] = f"{folder}/{name}"
    return found


def newest_revision(location: Location, folder: str, stem: str) -> str | None:
    """The key of the record's highest revision in `folder`, or None."""
    found = revisions(location, folder, stem)
    return found[max(found)] if found else None


def newest_revisions(location: Location, dataset: str, partition: str, stem: str) -> list[str]:
    """The key of the highest revision of each partition's record below `dataset`, sorted:
    one recursive listing (on object storage, one LIST per 1,000 keys) instead of one per
    partition.

    Args:
        location: the store's location.
        dataset: `runs`, say.
        partition: what a partition's folder name starts with (`run_id=`).
        stem: the record's file stem (`run`).
    """
    newest: dict[str, tuple[int, str]] = {}
    for key in location.keys(dataset):
        parts = key.split("/")
        # `<dataset>/<partition>/<name>`: nothing else is a record.
        if len(parts) != 3 or not parts[1].startswith(partition):
            continue
        revision = revision_of(parts[2], stem)
        folder = parts[1]
        if revision is not None and (folder not in newest or newest[folder][0] < revision):
            newest[folder] = (revision, key)
    return sorted(key for _, key in newest.values())


def write_revision(
    location: Location, folder: str, stem: str, table: Callable[[int], pa.Table], staging: str
) -> int:
    """Write `table(n)` as `<stem>-<n>.parquet`, n one more than the newest revision: if another
    writer took n meanwhile (put-if-absent), the next one."""
    while True:
        revision = max(revisions(location, folder, stem), default=0) + 1
        if location.create(_name(folder, stem, revision), table(revision), staging):
            return revision


def write_revision_after(
    location: Location, folder: str, stem: str, table: Callable[[int], pa.Table], staging: str, after: int
) -> int | None:
    """Write `table(n)` as revision n = `after + 1`, where `after` is the revision the writer
    holds, listing nothing; None if another writer took n. Revisions are taken in order (each
    one more than the newest listed), so n free means nothing was written since `after`."""
    revision = after + 1
    created = location.create(_name(folder, stem, revision), table(revision), staging)
    return revision if created else None


def _name(folder: str, stem: str, revision: int) -> str:
    return f"{folder}/{stem}-{revision:06d}.parquet"
