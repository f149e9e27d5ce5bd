"""The store in a local folder: a `Location` (`_location.py`) whose put-if-absent is a hard link
of a complete temporary file and whose batches are staged under `.staging/` and renamed into
place (the protocol of `assay/store/local.py`); artifacts are files in `<root>/artifacts` itself.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa

from assay._files import create_new, write_atomic
from assay.store import _publish
from assay.store._location import ARTIFACTS
from assay.store._publish import STAGED, staged_name, write_parquet

_TRASH = ".trash"


class LocalFolder:
    """The store in a local folder (see the module docstring).

    Args:
        root: the folder (made by the first write).
    """

    storage_options: dict[str, str] | None = None
    local = True

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = str(root)
        self.artifacts = FolderArtifacts(root / ARTIFACTS)

    def path(self, key: str) -> Path:
        return self.root / key if key else self.root

    def names(self, key: str) -> list[str]:
        try:
            return sorted(os.listdir(self.path(key)))
        except (FileNotFoundError, NotADirectoryError):
            return []

    def exists(self, key: str) -> bool:
        return self.path(key).exists()

    def read(self, key: str) -> bytes:
        return self.path(key).read_bytes()

    def read_head(self, key: str, limit: int) -> tuple[bytes, int]:
        return _head(self.path(key), limit)

    def write(self, key: str, data: bytes) -> None:
        write_atomic(self.path(key), data)

    def create(self, key: str, data: bytes | pa.Table, staging: str) -> bool:
        def write(tmp: Path) -> None:
            if isinstance(data, pa.Table):
                write_parquet(data, tmp)
            else:
                tmp.write_bytes(data)

        # A random staging name: `create_new` links it to `key` or removes it.
        return create_new(self.path(key), write, temporary=_temporary(self.path(staging)))

    def delete(self, key: str) -> None:
        self.path(key).unlink(missing_ok=True)

    def delete_tree(self, key: str) -> None:
        shutil.rmtree(self.path(key), ignore_errors=True)

    def keys(self, key: str) -> list[str]:
        # os.walk's scandir tells files from folders without a stat per file (rglob's is_file).
        found: list[str] = []
        for folder, _, files in os.walk(self.path(key)):
            prefix = Path(folder).relative_to(self.root).as_posix()
            found.extend(f"{prefix}/{name}" for name in files)
        return sorted(found)

    def delete_trees(self, keys: Sequence[str], label: str) -> None:
        # Each folder renamed into `.trash/` (atomic each), in order, then the trash deleted.
        trash = self.root / _TRASH / f"{label}-{uuid.uuid4().hex[:8]}"
        for key in keys:
            folder = self.path(key)
            if folder.exists():
                target = trash / key.split("/", 1)[0].removeprefix(".")
                target.parent.mkdir(parents=True, exist_ok=True)
                os.replace(folder, target)
        shutil.rmtree(self.root / _TRASH, ignore_errors=True)

    def reader_path(self, key: str) -> str:
        return str(self.path(key))

    def commit_batch(self, tables: Sequence[tuple[str, pa.Table]], staging: str) -> None:
        batch = self.path(staging)
        batch.mkdir(parents=True, exist_ok=True)
        for final, table in tables:
            _publish.stage(table, batch, staged_name(final))
        self.publish_staged(staging, [(staged_name(final), final) for final, _ in tables])

    def staged_batches(self, staging: str) -> list[tuple[str, bool]]:
        found = []
        for name in self.names(staging):
            entry = self.path(f"{staging}/{name}")
            if entry.is_dir():
                found.append((f"{staging}/{name}", (entry / f"items{STAGED}").exists()))
            elif _abandoned(entry):  # a record's staged file whose writer was killed before it was published
                entry.unlink(missing_ok=True)
        return found

    def publish_staged(self, batch: str, finals: Sequence[tuple[str, str]]) -> None:
        folder = self.path(batch)
        for name, final in finals:
            staged = folder / f"{name}{STAGED}"
            if staged.exists():
                target = self.path(final)
                target.parent.mkdir(parents=True, exist_ok=True)
                _publish.crash_point("publish", name)
                # The part name is fresh (random), so the rename never replaces a file.
                os.replace(staged, target)
        shutil.rmtree(folder, ignore_errors=True)


class FolderArtifacts:
    """Artifacts in a local store: in place in `<root>/artifacts`, nothing to upload or fetch.

    Args:
        root: `<root>/artifacts`.
    """

    def __init__(self, root: Path) -> None:
        self.root = root

    def sidecar(self, relative: str) -> Path:
        return self.root / relative

    def upload(self, item_folders: list[str], run_partition: str) -> None:
        return None  # written in place

    def committed(self, item_folders: list[str]) -> None:
        return None

    def read(self, relative: str) -> bytes:
        return (self.root / relative).read_bytes()

    def read_head(self, relative: str, limit: int) -> tuple[bytes, int]:
        return _head(self.root / relative, limit)

    def fetch_folder(self, relative: str) -> Path:
        return self.root / relative


def _head(path: Path, limit: int) -> tuple[bytes, int]:
    """A file's first `limit` bytes and its size, from one open file (the size is the file's read)."""
    with path.open("rb") as file:
        return file.read(limit), os.fstat(file.fileno()).st_size


# A record's staged file lives for the milliseconds its `create` takes; one this old was left by a
# killed writer. A younger one may be another live writer's (a Dask worker's shard execution, a
# lease renewal) and must not be removed under it.
_ABANDONED_AFTER_S = 600.0


def _abandoned(entry: Path) -> bool:
    try:
        return time.time() - entry.stat().st_mtime > _ABANDONED_AFTER_S
    except FileNotFoundError:  # its writer published or removed it meanwhile
        return False


def _temporary(staging: Path) -> Path:
    return staging / f"{uuid.uuid4().hex}{STAGED}"
