"""The store below an `s3://bucket/prefix`: a `Location` (`_location.py`) through obstore.

Put-if-absent is a PUT with `If-None-Match: *` (HTTP 412: taken); a batch is PUT part by part, the
items part last, nothing staged (the module docstring of `_location.py`); artifacts are written
into this process's spool and uploaded per attempt (`_spool.py`).
"""

from __future__ import annotations

import io
import os
from collections.abc import Sequence
from typing import Any, BinaryIO

import pyarrow as pa

from assay.errors import InputError, StoreError
from assay.settings import settings
from assay.store import _publish
from assay.store._location import s3_problem
from assay.store._publish import staged_name, write_parquet
from assay.store._spool import Spool, spool_for

# What a download holds in memory at a time.
_DOWNLOAD_CHUNK = 1 << 20


def parquet_bytes(table: pa.Table) -> bytes:
    """`table` as the bytes of a Parquet file."""
    sink = io.BytesIO()
    write_parquet(table, sink)
    return sink.getvalue()


class ObjectPrefix:
    """The store below `s3://bucket/prefix`, through obstore (see the module docstring).

    Args:
        url: `s3://bucket` or `s3://bucket/prefix`.
    """

    local = False

    def __init__(self, url: str) -> None:
        from obstore.store import S3Store

        bucket, _, prefix = url.removeprefix("s3://").partition("/")
        if (problem := s3_problem(url)) is not None:
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

    def download(self, key: str, out: BinaryIO) -> int:
        """Write the object's bytes into `out` a chunk at a time (a part is never whole in
        memory); returns its size. `FileNotFoundError` if there is no such object."""
        import obstore

        size = 0
        for chunk in obstore.get(self.store, key).stream(min_chunk_size=_DOWNLOAD_CHUNK):
            size += out.write(memoryview(chunk))
        return size

    def read_head(self, key: str, limit: int) -> tuple[bytes, int]:
        import obstore

        # One GET without a range, its body streamed and dropped after the first chunk: a ranged
        # GET of an empty object is an HTTP 416, and asking its size first is a second request.
        result = obstore.get(self.store, key)
        size = result.meta["size"]
        if size <= limit:
            return bytes(result.bytes()), size
        return bytes(next(iter(result.stream(min_chunk_size=limit))))[:limit], size

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

    def delete_trees(self, keys: Sequence[str], label: str) -> None:
        for key in keys:
            self.delete_tree(key)

    def reader_path(self, key: str) -> str:
        return f"{self.url}/{key}"

    @property
    def root(self) -> str:
        return self.url

    @property
    def artifacts(self) -> Spool:
        return spool_for(self)

    def commit_batch(self, tables: Sequence[tuple[str, pa.Table]], staging: str) -> None:
        for final, table in tables:
            _publish.crash_point("publish", staged_name(final))
            if not self.create(final, table, staging):
                raise StoreError(f"{self.reader_path(final)} exists already: a part name was reused")

    def staged_batches(self, staging: str) -> list[tuple[str, bool]]:
        return []  # nothing is staged on object storage

    def publish_staged(self, batch: str, finals: Sequence[tuple[str, str]]) -> None:
        raise StoreError("object storage stages nothing")  # never called: staged_batches is empty
