"""Artifacts of a store on object storage: written into a local spool, uploaded per item folder.

Targets keep writing files into a folder (Docker copies a workspace out, the harness client streams
downloads, transcripts are appended to), whatever the store. With the store in a local folder that
folder is `<store>/artifacts` itself; with it on object storage it is this process's **spool**, a
temporary folder holding `artifacts/run_id=<id>/<item>/<trial>/...` exactly as a local store would:

    <tmp>/assay-spool-XXXX/artifacts/run_id=<id>/<item>/<trial>/...   item folders being written
    <tmp>/assay-spool-XXXX/artifacts/run_id=<id>/@<name>              run sidecars (seeded, appended)
    <tmp>/assay-spool-XXXX/fetched/...                                 what readers downloaded

When a batch is committed (`Store.commit_batch`, in the process that ran its items: a Dask
worker, never the driver) every item folder of the batch with a spool folder is **synced** to
`artifacts/<same path>` before the batch's first part is PUT: each file PUT under its deterministic
key (the path `items.artifacts` names), then any key below the item folder's prefix that the folder no
longer holds (left by a killed earlier execution) deleted. So a committed row never names a missing
file, and a re-executed item overwrites its own keys instead of adding a second set. After the
commit the item's spool folder is removed. Design and guarantees: docs/storage.md.

A run sidecar (`@<name>`, an append-only text file such as the harness run-id ledger) is one object
per writing process on object storage, `artifacts/run_id=<id>/@<name>/<writer>`: asking for it
downloads the other writers' pieces into the spool file (this process's own lines after them), and
each commit PUTs this process's lines as its piece. Appends never race across processes.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from assay.store._location import ARTIFACTS, Location

# Concurrent PUTs of one item folder's files: a workspace is many small files, each a round trip.
_UPLOADS_AT_ONCE = 8

_spools: dict[str, Spool] = {}
_spools_lock = threading.Lock()


def spool_for(location: Location) -> Spool:
    """This process's spool for the store at `location` (one per store URL, so every `Store` of
    the same URL in a process — the run's, its target's — writes and uploads the same files)."""
    with _spools_lock:
        spool = _spools.get(location.url)
        if spool is None:
            spool = _spools[location.url] = Spool(location)
        return spool


class Spool:
    """The local folder artifacts are written into before they are uploaded (module docstring).

    Args:
        location: the store's bucket prefix.
    """

    def __init__(self, location: Location) -> None:
        self._location = location
        self._folder: Path | None = None
        # This process's pieces of run sidecars are keyed by it: no two processes write one key.
        self._writer = uuid.uuid4().hex[:16]
        # Sidecar spool file -> how many of its leading bytes came from other writers' pieces.
        self._seeded: dict[Path, int] = {}
        self._lock = threading.RLock()  # `root` is read while it is held

    @property
    def folder(self) -> Path:
        """The spool's folder, created at first use and removed when the process exits."""
        with self._lock:
            if self._folder is None:
                self._folder = Path(tempfile.mkdtemp(prefix="assay-spool-"))
                atexit.register(shutil.rmtree, self._folder, ignore_errors=True)
            return self._folder

    @property
    def root(self) -> Path:
        """`<spool>/artifacts`: what `Store.artifacts_root` is on object storage."""
        return self.folder / ARTIFACTS

    # -- writing ----------------------------------------------------------------------------------

    def sidecar(self, relative: str) -> Path:
        """A run sidecar's spool file, holding every other writer's lines (downloaded now) and
        then this process's own.

        Args:
            relative: the sidecar's path below `artifacts/` (`run_id=<id>/@<name>`).
        """
        path = self.root / relative
        prefix = f"{ARTIFACTS}/{relative}"
        others = b"".join(
            self._location.read(f"{prefix}/{name}")
            for name in self._location.names(prefix)
            if name != self._writer
        )
        with self._lock:
            own = path.read_bytes()[self._seeded.get(path, 0) :] if path.exists() else b""
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(others + own)
            self._seeded[path] = len(others)
        return path

    def upload(self, item_folders: list[str], run_partition: str) -> None:
        """Sync the item folders' spool copies to their keys, and the run's sidecars: before the
        batch that names their files is committed.

        Args:
            item_folders: item folders below `artifacts/` (`run_id=<id>/<item>/<trial>`); those
                without a spool folder (nothing kept, or a rescore's rows) are skipped.
            run_partition: `run_id=<id>`, whose sidecars are uploaded.
        """
        if self._folder is None:  # no target of this process wrote a file (an LLM run, a rescore)
            return
        for item_folder in item_folders:
            folder = self.root / item_folder
            if folder.is_dir():
                self._sync(folder, f"{ARTIFACTS}/{item_folder}")
        self._upload_sidecars(self.root / run_partition)

    def _sync(self, folder: Path, prefix: str) -> None:
        """PUT every file of `folder` under `prefix` (plain PUTs: the keys are the item's own),
        then delete the keys below `prefix` that the folder does not hold."""
        files = {f"{prefix}/{p.relative_to(folder).as_posix()}": p for p in folder.rglob("*") if p.is_file()}
        with ThreadPoolExecutor(max_workers=_UPLOADS_AT_ONCE, thread_name_prefix="assay-upload") as pool:
            # `list` so that the first failed PUT raises here, before any part is committed.
            list(pool.map(lambda item: self._location.write(item[0], item[1].read_bytes()), files.items()))
        stale = [key for key in self._location.keys(prefix) if key not in files]
        for key in stale:
            self._location.delete(key)

    def _upload_sidecars(self, run_folder: Path) -> None:
        with self._lock:
            for path, seeded in self._seeded.items():
                if path.parent != run_folder or not path.exists():
                    continue
                own = path.read_bytes()[seeded:]
                if own:
                    relative = path.relative_to(self.root).as_posix()
                    self._location.write(f"{ARTIFACTS}/{relative}/{self._writer}", own)

    def committed(self, item_folders: list[str]) -> None:
        """Remove the spool folders of items whose batch is committed (they are in the bucket)."""
        for item_folder in item_folders:
            shutil.rmtree(self.root / item_folder, ignore_errors=True)

    # -- reading ----------------------------------------------------------------------------------

    def read(self, relative: str) -> bytes:
        """A kept file's bytes (`FileNotFoundError` if the bucket has none).

        Args:
            relative: its path in `items.artifacts` (below `artifacts/`).
        """
        return self._location.read(f"{ARTIFACTS}/{relative}")

    def read_head(self, relative: str, limit: int) -> tuple[bytes, int]:
        """A kept file's first `limit` bytes and its whole size (`FileNotFoundError` if the
        bucket has none): the rest is not downloaded.

        Args:
            relative: its path in `items.artifacts` (below `artifacts/`).
            limit: the most bytes read (> 0).
        """
        return self._location.read_head(f"{ARTIFACTS}/{relative}", limit)

    def fetch_folder(self, relative: str) -> Path:
        """A kept folder (an exported workspace) downloaded into the spool; its local path.

        Args:
            relative: its path in `items.artifacts` (below `artifacts/`).
        """
        target = self.folder / "fetched" / f"{uuid.uuid4().hex[:8]}-{relative.rsplit('/', 1)[-1]}"
        prefix = f"{ARTIFACTS}/{relative}"
        resolved = target.resolve()
        for key in self._location.keys(prefix):
            dest = (target / key.removeprefix(prefix + "/")).resolve()
            if not dest.is_relative_to(resolved):  # a key spelt to escape the folder: not ours
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(self._location.read(key))
        target.mkdir(parents=True, exist_ok=True)
        return target
