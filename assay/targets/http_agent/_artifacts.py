"""What the store keeps of harness runs: each attempt's artifacts (downloaded within size limits)
and trajectory in its artifacts folder, and the run's ledger of harness run ids.

An attempt's folder is `store.artifacts_dir(run_id, item_id, trial)`; each harness run of it
(a session has several) gets a subfolder named for its run id, holding `trajectory.json` and
`files/` (the downloads, never over the trajectory). The ledger (`harness-runs.jsonl`, a run-level
sidecar) records every run id a harness handed out, before the run is polled, so an id handed out
twice in one Assay run is caught even across a resume.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pydantic import ValidationError

from assay._files import replacing, write_atomic
from assay.errors import TargetFailure
from assay.spec import HttpAgentTarget
from assay.store import Store
from assay.targets.http_agent._files import is_safe_path
from assay.targets.http_agent._protocol import Artifact, Capabilities, first_error
from assay.targets.http_agent._trajectory import Trajectory

if TYPE_CHECKING:
    from assay.targets.http_agent._client import HarnessClient

LEDGER = "harness-runs.jsonl"
_FILES = "files"
_TRAJECTORY = "trajectory.json"
ATIF_FILE = "atif.json"


class RunIds:
    """The harness run ids handed out in one Assay run, each with the attempt it was for.

    Args:
        path: the run's ledger file (loaded now, appended to by `record`); None keeps the ids in
            memory only (no store).
    """

    def __init__(self, path: Path | None) -> None:
        self._path = path
        self._seen = _read_ledger(path) if path is not None else {}

    def owner(self, harness_id: str) -> str | None:
        """The attempt `harness_id` was already returned for, if any."""
        return self._seen.get(harness_id)

    def record(self, harness_id: str, item_id: str, trial: int) -> None:
        """Note `harness_id` as this attempt's; written to the ledger at once, so a process
        killed while the run is polled still leaves the id behind."""
        self._seen[harness_id] = owner(item_id, trial)
        if self._path is not None:
            self._path.parent.mkdir(parents=True, exist_ok=True)
            line = json.dumps({"id": harness_id, "item_id": item_id, "trial": trial}) + "\n"
            with self._path.open("a", encoding="utf-8") as ledger:
                ledger.write(line)


def owner(item_id: Any, trial: Any) -> str:
    return f"item {item_id!r} trial {trial}"


def _read_ledger(path: Path) -> dict[str, str]:
    """The run's recorded harness run ids (id -> the attempt it was returned for)."""
    seen: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return seen
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by a kill: its run never got further than its start
        if isinstance(entry, dict) and isinstance(entry.get("id"), str):
            seen.setdefault(entry["id"], owner(entry.get("item_id"), entry.get("trial")))
    return seen


def run_folder(harness_id: str) -> str:
    """The folder of one harness run's files inside its item x trial's: the run id, quoted into
    one path segment (ids are unique within an Assay run: the ledger sees to it), or a hash of a
    long one, which would not fit a file name."""
    quoted = quote(harness_id, safe="")
    return quoted if len(quoted) <= 100 else f"run-{hashlib.sha256(harness_id.encode()).hexdigest()[:16]}"


def clear(folder: Path) -> None:
    """Remove a folder (or a file in its place) if it exists."""
    if folder.is_dir():
        shutil.rmtree(folder)
    elif folder.exists():
        folder.unlink()


def listed_artifacts(raw: list[Any] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The artifacts a run state lists, with safe paths, and a warning for each one skipped."""
    kept: list[dict[str, Any]] = []
    warnings: list[str] = []
    for entry in raw or []:
        try:
            artifact = Artifact.model_validate(entry)
        except ValidationError as exc:
            warnings.append(f"artifact {entry!r:.80} skipped: {first_error(exc)}")
            continue
        if not is_safe_path(artifact.path):
            warnings.append(f"artifact {artifact.path!r:.200} skipped: unsafe path (absolute or with '..')")
            continue
        kept.append(artifact.model_dump(exclude_none=True))
    return kept, warnings


class Keeper:
    """Keeps what harness runs leave: downloads their artifacts and writes their trajectories.

    Args:
        client: the harness's client.
        store: the run's store.
        spec: the target spec (`max_artifact_bytes`, `max_attempt_bytes`).
    """

    def __init__(self, client: HarnessClient, store: Store, spec: HttpAgentTarget) -> None:
        self._client = client
        self._store = store
        self._per_file = spec.max_artifact_bytes
        self._per_attempt = spec.max_attempt_bytes

    async def keep(
        self,
        caps: Capabilities,
        harness_id: str,
        folder: Path,
        artifacts: list[dict[str, Any]],
        trajectory: Trajectory,
    ) -> tuple[list[str], list[str]]:
        """Download the listed (safe) artifacts into `folder/files/` and write the trajectory to
        `folder/trajectory.json`; returns the kept files' paths relative to `<store>/artifacts`
        (as `items.artifacts` holds them), and a warning for every artifact not kept."""
        kept: list[Path] = []
        warnings: list[str] = []
        if artifacts and not caps.provides.workspace:
            warnings.append(
                f"{len(artifacts)} artifacts not downloaded: the harness does not serve files "
                "(provides.workspace is false)"
            )
        elif artifacts:
            paths, warnings = await self._download_all(harness_id, folder / _FILES, artifacts)
            kept += paths
        if trajectory.kept:
            path = folder / _TRAJECTORY
            document = trajectory.document(harness_id)
            write_atomic(path, json.dumps(document, ensure_ascii=False, default=str).encode())
            kept.append(path)
            if trajectory.atif is not None:  # the ATIF document itself, as validated
                path = folder / ATIF_FILE
                write_atomic(path, json.dumps(trajectory.atif, ensure_ascii=False).encode())
                kept.append(path)
        root = self._store.artifacts_root
        return sorted(p.relative_to(root).as_posix() for p in kept), warnings

    async def _download_all(
        self, harness_id: str, root: Path, artifacts: list[dict[str, Any]]
    ) -> tuple[list[Path], list[str]]:
        """`GET /runs/{id}/files/{path}` of each artifact into `root`, within the size limits.
        A file that fails or passes a limit is skipped with a warning; the rest still come."""
        import httpx  # loaded with the client already (see `_agent`)

        per_file, left = self._per_file, self._per_attempt
        resolved_root = root.resolve()
        kept: list[Path] = []
        warnings: list[str] = []
        taken: set[Path] = set()
        for artifact in artifacts:
            # `./a` and `a//b` name `a` and `a/b` (an HTTP client would drop the dot anyway).
            path = "/".join(s for s in artifact["path"].split("/") if s not in ("", "."))
            dest = (root / path).resolve()
            # `is_safe_path` already refused absolute paths and `..`; checking the resolved path
            # as well means no path spelling can ever write outside the attempt's folder.
            if not dest.is_relative_to(resolved_root) or dest == resolved_root:
                warnings.append(
                    f"artifact {path!r:.200} skipped: it does not name a file inside the attempt's folder"
                )
                continue
            if dest in taken:
                continue  # listed twice (`a` and `./a`): fetched once
            size = artifact.get("size")
            if per_file == 0 or (size is not None and size > per_file):
                warnings.append(_too_large(path, size, "max_artifact_bytes", per_file))
                continue
            if size is not None and size > left:
                warnings.append(_too_large(path, size, "max_attempt_bytes", self._per_attempt))
                continue
            limit = min(per_file, left)
            try:
                written = await self._download(harness_id, path, dest, limit)
            except _TooLarge as exc:
                if limit == per_file or (exc.seen is not None and exc.seen > per_file):
                    warnings.append(_too_large(path, exc.seen, "max_artifact_bytes", per_file))
                else:
                    warnings.append(_too_large(path, exc.seen, "max_attempt_bytes", self._per_attempt))
                continue
            except TargetFailure as failure:
                warnings.append(f"artifact {path!r:.200} not downloaded: {failure.message}")
                continue
            except (httpx.HTTPError, OSError) as exc:
                warnings.append(f"artifact {path!r:.200} not downloaded: {type(exc).__name__}: {exc}")
                continue
            taken.add(dest)
            kept.append(dest)
            left -= written
        return kept, warnings

    async def _download(self, harness_id: str, path: str, dest: Path, limit: int) -> int:
        """Stream one artifact into `dest` (via a temporary file); returns its size. Raises
        `_TooLarge` past `limit` bytes (nothing is left behind)."""
        what = f"GET /runs/{harness_id}/files/{path}"
        url = f"/runs/{quote(harness_id, safe='')}/files/{quote(path, safe='/')}"
        response = await self._client.request("GET", url, what=what, stream=True)
        written = 0
        try:
            declared = response.headers.get("content-length")
            if declared and declared.isdigit() and int(declared) > limit:
                raise _TooLarge(int(declared))
            with replacing(dest) as out:
                async for chunk in response.aiter_bytes():
                    written += len(chunk)
                    if written > limit:
                        raise _TooLarge(None)
                    out.write(chunk)
        finally:
            await response.aclose()
        return written


class _TooLarge(Exception):
    """An artifact past the size limit; `seen`: its declared size, if the harness said one."""

    def __init__(self, seen: int | None) -> None:
        super().__init__(seen)
        self.seen = seen


def _too_large(path: str, size: int | None, setting: str, limit: int) -> str:
    what = f"{size} bytes" if size is not None else "larger"
    return f"artifact {path!r:.200} not downloaded: {what}, past target.{setting} ({limit})"
