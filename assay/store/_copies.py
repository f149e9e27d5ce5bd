"""Local copies of an object store's parts, for a reader that reads the same parts again and again
(`assay view`): each `part-*.parquet` a query needs is fetched once (one GET of the whole object,
written to disk as it arrives) into a local folder, and Polars reads the copy — its footer, columns and row groups at disk speed
instead of a ranged GET each.

Only parts are copied, because only they are immutable: a part's name is fresh (shard, lease
generation, random) and no key is ever overwritten, so a copy can never be stale. Which parts a
query reads still comes from listing the bucket, so a new batch shows at once and a deleted run
is never read back from its copies. Run records, revisions, leases and labels are always read
from the bucket.

The folder is bounded: past its byte cap, the copies read longest ago are deleted — but none read
in the last `GRACE_S` seconds, which a query still under way may be reading (so the copies may
exceed the cap while the parts of the last minute's queries alone exceed it).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from assay._files import replacing

if TYPE_CHECKING:
    from assay.store._bucket import ObjectPrefix

# Parts are fetched side by side: a run of 1,000,000 items is a few dozen objects, and each GET
# waits mostly on the network.
_FETCHERS = 8
# A copy handed to a query is not deleted for this long: the query reads it once it is collected,
# within its request (`paths` hands out paths, not open files).
GRACE_S = 60.0


def copyable(key: str) -> bool:
    """Whether `key` is a part (immutable, so a copy of it is never stale)."""
    name = key.rsplit("/", 1)[-1]
    return name.startswith("part-") and name.endswith(".parquet")


class PartCopies:
    """A folder of local copies of a bucket's parts, least recently read deleted past a cap.

    Args:
        location: the bucket the parts are read from.
        folder: where the copies are kept (created; its contents are this object's).
        cap_bytes: the copies' total size past which the least recently read are deleted.
        grace_s: how long a copy handed out is kept whatever the cap (`GRACE_S`).
    """

    def __init__(
        self, location: ObjectPrefix, folder: Path, cap_bytes: int, grace_s: float = GRACE_S
    ) -> None:
        self.location = location
        self.folder = folder
        self.cap_bytes = cap_bytes
        self.grace_s = grace_s
        # key -> (bytes, when last handed out), least recently handed out first
        self._copies: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._lock = threading.Lock()
        folder.mkdir(parents=True, exist_ok=True)

    @property
    def kept_bytes(self) -> int:
        """The copies' total size now."""
        with self._lock:
            return sum(size for size, _ in self._copies.values())

    def paths(self, keys: Sequence[str]) -> list[str]:
        """The local paths of `keys`' copies, fetching those not copied yet; a key gone from the
        bucket since it was listed (its run deleted meanwhile) is left out.

        Args:
            keys: parts (`copyable`), as listed from the bucket.
        """
        fetched: dict[str, int | None] = {}
        while True:
            with self._lock:
                # A copy deleted behind this object's back (a temporary-files cleaner) is
                # fetched again: read without it, its rows would be taken for a deleted run's.
                for key in [key for key in keys if key in self._copies and key not in fetched]:
                    if not self._path(key).is_file():
                        del self._copies[key]
                missing = [key for key in keys if key not in self._copies and key not in fetched]
            if missing:
                with ThreadPoolExecutor(max_workers=min(_FETCHERS, len(missing))) as pool:
                    fetched.update(zip(missing, pool.map(self._fetch, missing), strict=True))
            with self._lock:
                # Another query may have deleted a copy meanwhile (one not read for `grace_s`):
                # fetch it again rather than read without it.
                if any(key not in fetched and key not in self._copies for key in keys):
                    continue
                return self._hand_out(keys, fetched)

    def _hand_out(self, keys: Sequence[str], fetched: dict[str, int | None]) -> list[str]:
        now = time.monotonic()
        present: list[str] = []
        for key in keys:
            size = fetched[key] if key in fetched else self._copies[key][0]
            if size is None:
                continue
            self._copies[key] = (size, now)
            self._copies.move_to_end(key)
            present.append(key)
        self._evict(now)
        return [str(self._path(key)) for key in present]

    def _path(self, key: str) -> Path:
        # The key's own path below the folder: a reader's hive partitioning (`run_id=…`) reads it.
        return self.folder / key

    def _fetch(self, key: str) -> int | None:
        """Copy one part (one GET, written under a temporary name, then renamed into place so a
        reader never sees half a copy); its size, or None if the bucket no longer has it."""
        try:
            with replacing(self._path(key)) as out:
                return self.location.download(key, out)
        except FileNotFoundError:
            if self.location.exists(key):
                raise  # the local folder's, not the bucket's: the copy could not be written
            return None

    def _evict(self, now: float) -> None:
        total = sum(size for size, _ in self._copies.values())
        for key, (size, handed_out) in list(self._copies.items()):
            if total <= self.cap_bytes or now - handed_out < self.grace_s:
                return  # the rest were handed out more recently still
            del self._copies[key]
            total -= size
            self._path(key).unlink(missing_ok=True)
