"""Writing a file so that no reader ever sees part of it, in one place.

Every file Assay writes outside the store's datasets (the response cache, an http_agent's
sidecars and artifacts, the HTML report, leases) and the store's own records go through these:
the bytes are written whole under a temporary name, which then becomes the file's name in one
step. A process killed while writing leaves at most a temporary file, never a torn one.

    replacing(path)                    a file object; on success it replaces `path` (rename)
    write_atomic(path, data)           `data` replacing `path`
    create_new(path, write, temporary) `path` created by `write` unless it exists (hard link)
    put_if_absent(path, data)          `data` as `path` unless it exists

A temporary file beside its target is hidden and unique: `.tmp-<random>-<name>`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

TMP_PREFIX = ".tmp-"


def temporary_beside(path: Path) -> Path:
    """A fresh temporary name in `path`'s folder: hidden, unique, ending with its name."""
    return path.with_name(f"{TMP_PREFIX}{uuid.uuid4().hex[:12]}-{path.name}")


@contextmanager
def replacing(path: Path) -> Iterator[BinaryIO]:
    """A file open for writing that, when the block ends without an exception, replaces `path`
    in one step (a reader sees the old file or the new one, never part of it); when the block
    raises, the temporary file is removed and `path` is left as it was.

    Args:
        path: the file to write; its folder is created if missing.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_beside(path)
    try:
        with tmp.open("wb") as out:
            yield out
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_atomic(path: Path, data: bytes | str) -> None:
    """Write `data` (text as UTF-8) to `path`, replacing it in one step.

    Args:
        path: the file; its folder is created if missing.
        data: the whole content.
    """
    with replacing(path) as out:
        out.write(data.encode("utf-8") if isinstance(data, str) else data)


def create_new(path: Path, write: Callable[[Path], None], temporary: Path | None = None) -> bool:
    """Create `path` unless a file has that name already (put-if-absent); True if this call
    created it. `write` writes the whole file under a temporary name, which is then hard-linked
    to `path`: a link fails when the name is taken, so of two writers exactly one creates the
    file, and it appears whole. The temporary name is removed either way.

    Args:
        path: the file to create; its folder is created if missing.
        write: writes the content to the path it is given.
        temporary: the temporary name (e.g. under a staging folder); default one beside `path`.
    """
    tmp = temporary if temporary is not None else temporary_beside(path)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    try:
        write(tmp)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
    finally:
        tmp.unlink(missing_ok=True)
    return True


def put_if_absent(path: Path, data: bytes) -> bool:
    """Create `path` holding `data` unless it exists; True if this call created it (see
    `create_new`)."""
    return create_new(path, lambda tmp: tmp.write_bytes(data))
