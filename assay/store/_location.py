"""Where the store's bytes live: what the store needs of that place (`Location`, `Artifacts`), and
which roots can be one (`root_problem`).

Everything the store keeps — the datasets' parts, run records, leases and fences, the response
cache, comparisons, leaderboards, reports — is read and written through one `Location`, by key
(a `/`-separated path below the store's root). Two kinds, which `Store` chooses by the root:

    LocalFolder(path)              a folder (`_folder.py`); put-if-absent is a hard link of a complete
                                   temporary file, a batch is staged under `.staging/` and renamed
                                   into place; artifacts are files there
    ObjectPrefix("s3://b/prefix")  a bucket prefix through obstore (`_bucket.py`); put-if-absent is a
                                   PUT with `If-None-Match: *` (HTTP 412: taken), a batch is PUT part
                                   by part; artifacts go through a local spool (`_spool.py`)

On object storage there is no rename, and none is needed: a PUT is atomic (a reader never sees
half an object) and the part names are fresh (shard, lease generation, random), so a batch is
published by PUTting its requests, turns and scores parts, then its items part — the commit
marker — last, each with `If-None-Match: *`. A writer killed between two PUTs leaves parts without
their items part, which every reader of the store ignores and `Store.recover` removes (the local
protocol's rename window, milliseconds instead of microseconds). Why obstore: docs/storage.md.

Credentials and endpoint for `s3://` come from the usual AWS environment variables
(`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION` /
`AWS_DEFAULT_REGION`), plus `ASSAY_S3_ENDPOINT` (or `AWS_ENDPOINT_URL`) for an S3-compatible
server; an `http://` endpoint is allowed as plain HTTP. A root that cannot work is bad input
before any request (`root_problem`): a local path that is, or lies below, a file; an `s3://` URL
with no credentials in the environment (the client's chain would end at the instance metadata
service, retried for minutes where nothing answers — used only when asked for,
`ASSAY_S3_INSTANCE_CREDENTIALS=1`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import pyarrow as pa

from assay.settings import env_name, settings

INSTANCE_CREDENTIALS_ENV = env_name("s3_instance_credentials")
# Below the root: the files targets keep (`Artifacts`).
ARTIFACTS = "artifacts"


class Location(Protocol):
    """What the store needs of the place its bytes live (keys are `/`-separated)."""

    url: str
    """The root as a user names it: a folder path or `s3://bucket/prefix`."""
    storage_options: dict[str, str] | None
    """What Polars' `scan_parquet` needs to read `reader_path`s (None for a local folder)."""
    local: bool
    """Whether the bytes are files of a local folder (a report or an artifact has a path)."""

    @property
    def root(self) -> Path | str:
        """The root as `Store.root` shows it: the folder's `Path`, or the URL."""
        ...

    @property
    def artifacts(self) -> Artifacts:
        """Where targets write the files they keep, and how those reach the store."""
        ...

    def names(self, key: str) -> list[str]:
        """The entries directly under `key` (files and folders), sorted; none if it is absent."""
        ...

    def exists(self, key: str) -> bool: ...

    def read(self, key: str) -> bytes:
        """The object's bytes; `FileNotFoundError` if there is none."""
        ...

    def read_head(self, key: str, limit: int) -> tuple[bytes, int]:
        """The object's first `limit` bytes (`limit` > 0) and its whole size, reading not much
        more than those; `FileNotFoundError` if there is none."""
        ...

    def write(self, key: str, data: bytes) -> None:
        """Create or replace an object in one step (a reader sees the old or the new)."""
        ...

    def create(self, key: str, data: bytes | pa.Table, staging: str) -> bool:
        """Put-if-absent: create the object unless one has that key; True if this call did.

        Args:
            key: the object.
            data: bytes, or a table written as Parquet.
            staging: a key below which a local folder writes the temporary file.
        """
        ...

    def delete(self, key: str) -> None:
        """Remove an object; no error if it is absent."""
        ...

    def delete_tree(self, key: str) -> None:
        """Remove every object below `key`."""
        ...

    def delete_trees(self, keys: Sequence[str], label: str) -> None:
        """Remove every object below each of `keys`, in order (a local folder renames each into
        `.trash/<label>-…` first, one atomic step a folder, then deletes the trash).

        Args:
            keys: the trees, each a distinct first path segment (`runs/run_id=x`, `.staging/…`).
            label: names the trash (the run's id).
        """
        ...

    def keys(self, key: str) -> list[str]:
        """Every object's key below `key` (at any depth)."""
        ...

    def reader_path(self, key: str) -> str:
        """The path or URL under which Polars (or an analyst) reads `key`."""
        ...

    def commit_batch(self, tables: Sequence[tuple[str, pa.Table]], staging: str) -> None:
        """Publish a batch's files, the last one (the commit marker) last.

        Args:
            tables: (final key, table) in publish order.
            staging: the batch's staging key (a local folder stages there first).
        """
        ...

    def staged_batches(self, staging: str) -> list[tuple[str, bool]]:
        """The batches a killed writer left under `staging`: (batch key, complete)."""
        ...

    def publish_staged(self, batch: str, finals: Sequence[tuple[str, str]]) -> None:
        """Finish publishing a complete staged batch: (staged name, final key) in order."""
        ...


class Artifacts(Protocol):
    """The files targets keep (transcripts, workspaces), below `<root>/artifacts/`: written into a
    local folder whatever the store (`root`), and on object storage uploaded per item folder before
    the batch naming them is committed (`_spool.py`)."""

    @property
    def root(self) -> Path:
        """The local folder targets write into: `<root>/artifacts`, or this process's spool."""
        ...

    def sidecar(self, relative: str) -> Path:
        """A run's append-only sidecar file (`run_id=<id>/@<name>`), holding every writer's lines."""
        ...

    def upload(self, item_folders: list[str], run_partition: str) -> None:
        """Before a batch is committed: its item folders, and the run's sidecars, into the store."""
        ...

    def committed(self, item_folders: list[str]) -> None:
        """After a batch is committed: what of its item folders need not be kept locally any more."""
        ...

    def read(self, relative: str) -> bytes:
        """A kept file's bytes (`FileNotFoundError` if there is none)."""
        ...

    def read_head(self, relative: str, limit: int) -> tuple[bytes, int]:
        """A kept file's first `limit` bytes and its whole size (`FileNotFoundError` if there is none)."""
        ...

    def fetch_folder(self, relative: str) -> Path:
        """A kept folder as a local folder (in place, or downloaded)."""
        ...


def root_problem(root: str | os.PathLike[str]) -> str | None:
    """Why `root` cannot be a store, in one line naming what is wrong or missing, or None; asks
    nothing of the network.

    Args:
        root: a folder path or `s3://bucket/prefix`.
    """
    text = os.fspath(root)
    if text.startswith("s3://"):
        problem = s3_problem(text)
    elif "://" in text and (scheme := text.partition("://")[0]).isalnum():
        problem = f"{scheme}:// is not a store Assay can use (a folder or s3://bucket/prefix)"
    else:
        problem = _folder_problem(Path(text))
    return None if problem is None else f"store {text!r}: {problem}"


def _folder_problem(path: Path) -> str | None:
    """Why no store folder can be at `path`: it, or the nearest of its parents that exists, is
    not a folder (a folder that does not exist yet is made by the first write)."""
    for candidate in (path, *path.parents):
        if candidate.is_dir():
            return None
        if candidate.exists() or candidate.is_symlink():
            what = "a file" if candidate.is_file() else "not a folder"
            if candidate == path:
                return f"it is {what}; name a folder (made if missing) or s3://bucket/prefix"
            return f"{str(candidate)!r} is {what}, so no folder can be made below it"
    return None


def _set(name: str) -> bool:
    return bool(os.environ.get(name))


def s3_problem(url: str) -> str | None:
    """Why an `s3://` root cannot be used: no bucket, or no credentials the client can find
    without asking the instance metadata service (the end of its chain)."""
    if not url.removeprefix("s3://").partition("/")[0]:
        return "an s3:// store names a bucket: s3://bucket/prefix"
    # The pairs that are credentials together (obstore reads them from the environment itself).
    for pair in (
        ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
        ("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN"),
    ):
        given = [name for name in pair if _set(name)]
        if len(given) == 2:
            return None
        if given:
            (missing,) = set(pair) - set(given)
            return f"{missing} is not set ({given[0]} is)"
    container = ("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI")
    if any(_set(name) for name in container):
        return None
    # Credentials from the instance metadata service (an EC2 instance role): only when asked for.
    if (
        os.environ.get("AWS_SKIP_SIGNATURE", "").lower() in ("1", "true")
        or settings().s3_instance_credentials
    ):
        return None
    profile = (
        " (AWS_PROFILE is set, but profiles are not read: export its keys, "
        '`eval "$(aws configure export-credentials --format env)"`)'
        if _set("AWS_PROFILE")
        else ""
    )
    return (
        "no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are not set "
        f"(nor a web identity or container credentials; on an EC2 instance role, set {INSTANCE_CREDENTIALS_ENV}=1)"
        + profile
    )
