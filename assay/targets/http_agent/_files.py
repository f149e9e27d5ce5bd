"""An item's fixture files: the `files` field read and checked, local files found (inside the
spec's folder only) and read for upload, and whether a harness can take them at all."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from assay.calls.http import Peer
from assay.outcomes import FailureKind
from assay.spec.dataset import Item
from assay.targets.http_agent._protocol import Capabilities

_DRIVE_LETTER = re.compile(r"^[A-Za-z]:")


def is_safe_path(path: Any) -> bool:
    """A relative path that stays inside the run's workspace: not empty, not absolute (POSIX,
    Windows or drive-letter), no `..` segment, no NUL."""
    if not isinstance(path, str) or not path or "\x00" in path:
        return False
    if path.startswith(("/", "\\")) or _DRIVE_LETTER.match(path):
        return False
    return ".." not in re.split(r"[/\\]", path)


def item_files(item: Item) -> list[dict[str, str]]:
    """The item's fixture files: its `files` field, a list of `{path, url}` (a file the harness
    fetches) or `{path, file}` (a local file Assay uploads; relative to the spec's folder); a CSV
    cell may hold that list as JSON text. None, "" and [] mean none. Raises ValueError (or
    TypeError) on any other shape; whether a local file exists is `local_problem`'s to say."""
    raw = item.fields.get("files")
    if raw is None or raw == "" or raw == []:
        return []
    if isinstance(raw, str):
        try:
            raw = json.loads(raw)
        except ValueError:
            raise ValueError("field 'files' is text but not a JSON list of {path, url}") from None
    if not isinstance(raw, list):
        raise TypeError(f"field 'files' must be a list of {{path, url}}, got {type(raw).__name__}")
    files = []
    for index, entry in enumerate(raw):
        where = f"field 'files'[{index}]"
        if not isinstance(entry, dict) or set(entry) not in ({"path", "url"}, {"path", "file"}):
            raise ValueError(
                f"{where} must be an object with `path` and one of `url` or `file`, got {entry!r:.80}"
            )
        if not is_safe_path(entry["path"]):
            raise ValueError(f"{where}.path must be a relative path without '..', got {entry['path']!r}")
        if "file" in entry:
            if not isinstance(entry["file"], str) or not entry["file"]:
                raise ValueError(f"{where}.file must be a local file's path, got {entry['file']!r:.80}")
            files.append({"path": entry["path"], "file": entry["file"]})
            continue
        url = entry["url"]
        if not isinstance(url, str) or not re.match(r"^https?://", url):
            raise ValueError(f"{where}.url must be an http(s) URL, got {url!r:.80}")
        files.append({"path": entry["path"], "url": url})
    return files


def local_file(spec_dir: Path | None, name: str) -> Path | None:
    """The local fixture file a dataset row names, or None when it lies outside the spec's folder
    (the working directory without one): rows are data, and `/proc/self/environ` or `~/.ssh`
    must never be uploaded to a harness."""
    root = (spec_dir or Path.cwd()).resolve()
    path = (root / name).resolve()
    return path if path.is_relative_to(root) else None


def local_problem(spec_dir: Path | None, files: list[dict[str, str]]) -> str | None:
    """Why the item's first unusable local fixture file cannot be uploaded, if one is."""
    for entry in files:
        if "file" in entry:
            path = local_file(spec_dir, entry["file"])
            if path is None:
                return f"fixture file {entry['file']!r} is outside the spec's folder: not uploaded"
            if not path.is_file():
                return f"fixture file {entry['file']!r} not found (looked for {path})"
    return None


def files_refused(caps: Capabilities, files: list[dict[str, str]]) -> str | None:
    """Why the harness cannot take the item's fixture files, if it cannot. A harness that takes
    files at all takes uploads (local files); URLs only if it says so."""
    if not files:
        return None
    if not caps.accepts.file_input:
        return "the harness accepts no fixture files"
    if not caps.accepts.file_urls and any("url" in f for f in files):
        # Assay does not fetch a URL to upload its bytes: the harness is the one to fetch it.
        return "the harness accepts fixture files only as uploads, and the item's files are URLs"
    return None


def read_uploads(
    peer: Peer, spec_dir: Path | None, item: Item, local: list[dict[str, str]]
) -> list[tuple[str, bytes]]:
    """The bytes of the item's local fixture files (`{path, file}` entries), as (path, bytes),
    read before the run starts: whole, since fixtures are small and a retried start must send
    the same bytes. Raises the peer's `TargetFailure` for a file that cannot be read."""
    uploads = []
    for entry in local:
        path = local_file(spec_dir, entry["file"])
        if path is None:
            raise peer.failure(
                f"item {item.item_id!r}: fixture file {entry['file']!r} is outside the spec's folder",
                FailureKind.PROTOCOL,
            )
        try:
            uploads.append((entry["path"], path.read_bytes()))
        except OSError as exc:
            raise peer.failure(
                f"item {item.item_id!r}: fixture file {entry['file']!r} cannot be read "
                f"({path}): {exc.strerror or exc}",
                FailureKind.EXCEPTION,
            ) from None
    return uploads
