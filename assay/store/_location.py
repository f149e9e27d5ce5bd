"""Where the store's bytes live: a local folder or a prefix of an S3-compatible bucket.

Everything the store keeps — the datasets' parts, run records, leases and fences, the response
cache, comparisons, leaderboards, reports — is read and written through one `Location`, by key
(a `/`-separated path below the store's root). Two kinds:

    LocalFolder(path)              a folder; put-if-absent is a hard link of a complete temporary
                                   file, a batch is staged under `.staging/` and renamed into place
    ObjectPrefix("s3://b/prefix")  a bucket prefix through obstore; put-if-absent is a PUT with
                                   `If-None-Match: *` (HTTP 412: taken), a batch is PUT part by part

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

import io
import os
import shutil
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import pyarrow as pa

from assay._files import create_new, write_atomic
from assay.errors import InputError, StoreError
from assay.settings import env_name, settings
from assay.store import _publish
from assay.store._publish import STAGED, write_parquet

INSTANCE_CREDENTIALS_ENV = env_name("s3_instance_credentials")


def parquet_bytes(table: pa.Table) -> bytes:
    """`table` as the bytes of a Parquet file."""
    sink = io.BytesIO()
    write_parquet(table, sink)
    return sink.getvalue()


class Location(Protocol):
    """What the store needs of the place its bytes live (keys are `/`-separated)."""

    url: str
    """The root as a user names it: a folder path or `s3://bucket/prefix`."""
    storage_options: dict[str, str] | None
    """What Polars' `scan_parquet` needs to read `reader_path`s (None for a local folder)."""

    def names(self, key: str) -> list[str]:
        """The entries directly under `key` (files and folders), sorted; none if it is absent."""
        ...

    def exists(self, key: str) -> bool: ...

    def read(self, key: str) -> bytes:
        """The object's bytes; `FileNotFoundError` if there is none."""
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


class LocalFolder:
    """The store in a local folder (the protocol of `assay/store/__init__.py`, unchanged)."""

    storage_options = None

    def __init__(self, root: Path) -> None:
        self.root = root
        self.url = str(root)

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

    def reader_path(self, key: str) -> str:
        return str(self.path(key))

    def commit_batch(self, tables: Sequence[tuple[str, pa.Table]], staging: str) -> None:
        batch = self.path(staging)
        batch.mkdir(parents=True, exist_ok=True)
        for final, table in tables:
            _publish.stage(table, batch, _staged_name(final))
        self.publish_staged(staging, [(_staged_name(final), final) for final, _ in tables])

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


class ObjectPrefix:
    """The store below `s3://bucket/prefix`, through obstore (see the module docstring).

    Args:
        url: `s3://bucket` or `s3://bucket/prefix`.
    """

    def __init__(self, url: str) -> None:
        from obstore.store import S3Store

        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if (problem := _s3_problem(url)) is not None:
            raise InputError(f"store {url!r}: {problem}")
        self.bucket, self.prefix = bucket, prefix.strip("/")
        self.url = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        config: dict[str, Any] = {}
        endpoint = settings().s3_endpoint or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint:
            config["endpoint"] = endpoint
            config["allow_http"] = endpoint.startswith("http://")
        region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if region:
            config["region"] = region
        # Keys that are given only to a client's constructor, never logged: the store reads the
        # same AWS variables itself, so these stay in the environment.
        self.store = S3Store(bucket, prefix=self.prefix or None, **config)
        self.storage_options: dict[str, str] | None = {
            **(
                {"aws_endpoint_url": endpoint, "aws_allow_http": str(endpoint.startswith("http://")).lower()}
                if endpoint
                else {}
            ),
            **({"aws_region": region} if region else {}),
        }

    def names(self, key: str) -> list[str]:
        import obstore

        listed = obstore.list_with_delimiter(self.store, key.rstrip("/") + "/" if key else None)
        prefixes = [p.rstrip("/").rsplit("/", 1)[-1] for p in listed["common_prefixes"]]
        objects = [o["path"].rsplit("/", 1)[-1] for o in listed["objects"]]
        return sorted({*prefixes, *objects})

    def exists(self, key: str) -> bool:
        import obstore

        try:
            obstore.head(self.store, key)
        except FileNotFoundError:
            return False
        return True

    def read(self, key: str) -> bytes:
        import obstore

        return bytes(obstore.get(self.store, key).bytes())

    def write(self, key: str, data: bytes) -> None:
        import obstore

        obstore.put(self.store, key, data)

    def create(self, key: str, data: bytes | pa.Table, staging: str) -> bool:
        import obstore
        from obstore.exceptions import AlreadyExistsError

        body = parquet_bytes(data) if isinstance(data, pa.Table) else data
        try:
            obstore.put(self.store, key, body, mode="create")
        except AlreadyExistsError:
            return False
        return True

    def delete(self, key: str) -> None:
        import obstore

        try:
            obstore.delete(self.store, key)
        except FileNotFoundError:
            pass

    def keys(self, key: str) -> list[str]:
        """Every object's key below `key` (at any depth)."""
        import obstore

        return [meta["path"] for batch in obstore.list(self.store, key.rstrip("/") + "/") for meta in batch]

    def delete_tree(self, key: str) -> None:
        import obstore

        for batch in obstore.list(self.store, key.rstrip("/") + "/"):
            obstore.delete(self.store, [meta["path"] for meta in batch])

    def reader_path(self, key: str) -> str:
        return f"{self.url}/{key}"

    def commit_batch(self, tables: Sequence[tuple[str, pa.Table]], staging: str) -> None:
        for final, table in tables:
            _publish.crash_point("publish", _staged_name(final))
            if not self.create(final, table, staging):
                raise StoreError(f"{self.reader_path(final)} exists already: a part name was reused")

    def staged_batches(self, staging: str) -> list[tuple[str, bool]]:
        return []  # nothing is staged on object storage

    def publish_staged(self, batch: str, finals: Sequence[tuple[str, str]]) -> None:
        raise StoreError("object storage stages nothing")  # never called: staged_batches is empty


def _staged_name(final: str) -> str:
    """A batch file's staged name: its dataset (`items/run_id=x/part.parquet` -> `items`)."""
    return final.split("/", 1)[0]


# A record's staged file lives for the milliseconds its `create` takes; one this old was left by a
# killed writer. A younger one may be another live writer's (a Dask worker's shard attempt, a
# lease renewal) and must not be removed under it.
_ABANDONED_AFTER_S = 600.0


def _abandoned(entry: Path) -> bool:
    try:
        return time.time() - entry.stat().st_mtime > _ABANDONED_AFTER_S
    except FileNotFoundError:  # its writer published or removed it meanwhile
        return False


def _temporary(staging: Path) -> Path:
    import uuid

    return staging / f"{uuid.uuid4().hex}{STAGED}"


def open_location(root: str | os.PathLike[str]) -> LocalFolder | ObjectPrefix:
    """The location a store root names: `s3://bucket/prefix`, else a local folder.

    Raises:
        InputError: the root cannot be a store (`root_problem`).
    """
    text = os.fspath(root)
    if text.startswith("s3://"):
        return ObjectPrefix(text)
    if (problem := root_problem(text)) is not None:
        raise InputError(problem)
    return LocalFolder(Path(text))


def root_problem(root: str | os.PathLike[str]) -> str | None:
    """Why `root` cannot be a store, in one line naming what is wrong or missing, or None; asks
    nothing of the network.

    Args:
        root: a folder path or `s3://bucket/prefix`.
    """
    text = os.fspath(root)
    if text.startswith("s3://"):
        problem = _s3_problem(text)
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


def _s3_problem(url: str) -> str | None:
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
