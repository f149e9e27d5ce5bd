"""The `http_agent` target: an agent behind an HTTP harness (docs/harness-protocol.md).

One harness run per item x trial: `POST /runs`, then `GET /runs/{id}` every `poll_interval` until
the run reports a final status, then `GET /runs/{id}/trajectory` when the harness provides one.
Everything goes through one httpx client over aiohttp's transport.

An item's local fixture files are uploaded with the start (multipart/form-data); files given as
URLs are passed on as URLs. With a store, a completed attempt keeps its artifacts
(`GET /runs/{id}/files/{path}`, within size limits) and its trajectory in its artifacts folder,
and every harness run id is recorded in the run's ledger: an id handed out twice in one Assay
run fails the later attempt, even across a resume.

What the harness can do is read once from `GET /capabilities` (`prepare`), and a run keeps that
snapshot: a resumed run passes it back (`capabilities=`) and never asks again, so it is gated and
modelled like the rest of the run even if the harness changed meanwhile.

Assay does not measure an agent's model calls (`instrumented = False`): the cost the trajectory
reports is kept as caller-reported cost, its token counts as caller-reported (reserved) figures.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import random
import re
import shutil
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx
import jsonschema
from httpx_aiohttp import AiohttpTransport
from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

from assay._files import replacing, write_atomic
from assay.errors import DatasetError, HarnessError, TargetFailure
from assay.outcomes import FailureKind, TrajectoryStatus
from assay.spec import HttpAgentTarget
from assay.spec.dataset import Item
from assay.store import Store
from assay.targets._base import SessionState, TargetResult

PROTOCOL = "assay-harness/1"
TERMINAL = frozenset({"completed", "failed", "timeout", "cancelled"})
STATUSES = TERMINAL | {"queued", "running"}

_RETRYABLE_STATUS = {429} | set(range(500, 600))
_MAX_RETRY_AFTER_S = 60.0
_BACKOFF_BASE_S = 0.25
_BACKOFF_MAX_S = 10.0
_MAX_PROBLEMS = 50
_CANCEL_TIMEOUT_S = 5.0
_MAX_RUN_ID = 256
_DRIVE_LETTER = re.compile(r"^[A-Za-z]:")
_LEDGER = "harness-runs.jsonl"
_FILES = "files"  # a harness run's downloaded artifacts, beside (never over) its trajectory.json
_TRAJECTORY = "trajectory.json"


# -- the protocol's documents ------------------------------------------------------------------


class _Lenient(BaseModel):
    """Harness documents may carry more than the protocol names; the rest is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Accepts(_Lenient):
    file_input: StrictBool = False
    file_urls: StrictBool = False
    model_override: StrictBool = False
    cancel: StrictBool = False
    sessions: StrictBool = False


class Provides(_Lenient):
    trajectory: StrictBool = False
    workspace: StrictBool = False


class Limits(_Lenient):
    max_concurrent_runs: int | None = Field(default=None, ge=1, strict=True)


class Capabilities(_Lenient):
    """`GET /capabilities`. Every section is optional; what is left out defaults to "no"."""

    accepts: Accepts = Accepts()
    provides: Provides = Provides()
    limits: Limits = Limits()
    input_schema: dict[str, Any] | bool | None = None


class Artifact(_Lenient):
    path: str
    size: int | None = Field(default=None, ge=0, strict=True)


class RunState(_Lenient):
    """`GET /runs/{id}`. `artifacts` is checked entry by entry (a bad entry is skipped, not fatal)."""

    status: str
    answer: str | None = None
    output: Any = None
    error: Any = None
    model: str | None = None
    artifacts: list[Any] | None = None


class StepTokens(_Lenient):
    input: int | None = Field(default=None, ge=0, strict=True)
    output: int | None = Field(default=None, ge=0, strict=True)


class Step(_Lenient):
    """One trajectory step: a message, the tool calls it made, what it consumed."""

    role: str = Field(min_length=1)
    content: Any = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    tokens: StepTokens | None = None
    cost_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)


# -- what a run found out ----------------------------------------------------------------------


@dataclass(slots=True)
class Trajectory:
    """A fetched trajectory after validation, reduced to what a run records."""

    status: TrajectoryStatus
    steps: list[Step] = field(default_factory=list)
    dropped_steps: int = 0
    problem: str | None = None
    raw: list[dict[str, Any]] = field(default_factory=list)
    """The valid steps as the harness sent them (fields the protocol does not name included):
    what scorers see and `trajectory.json` keeps."""

    @property
    def kept(self) -> bool:
        """Whether there are steps worth keeping (a valid or partial trajectory)."""
        return self.status in (TrajectoryStatus.VALID, TrajectoryStatus.PARTIAL)

    @property
    def cost(self) -> float | None:
        costs = [s.cost_usd for s in self.steps if s.cost_usd is not None]
        return math.fsum(costs) if costs else None

    @property
    def cost_complete(self) -> bool:
        """Whether `cost` covers the whole run: every step arrived, valid, and priced."""
        return self.status is TrajectoryStatus.VALID and all(s.cost_usd is not None for s in self.steps)

    def tokens(self) -> dict[str, int | None]:
        def total(values: Iterable[int | None]) -> int | None:
            known = [v for v in values if v is not None]
            return sum(known) if known else None

        reported = [s.tokens for s in self.steps if s.tokens is not None]
        return {"input": total(t.input for t in reported), "output": total(t.output for t in reported)}

    @property
    def step_count(self) -> int | None:
        """Steps the agent took: every step sent, a dropped (invalid) one too; None without a list
        of steps to count."""
        return len(self.steps) + self.dropped_steps if self.kept else None

    @property
    def tool_call_count(self) -> int | None:
        """Tool calls of those steps; None unless every step was valid (a dropped step's calls are
        unknown, and an undercount would read as a fact)."""
        return sum(len(s.tool_calls) for s in self.steps) if self.status is TrajectoryStatus.VALID else None

    def summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "trajectory_status": self.status.value,
            "steps": len(self.steps),
            "tool_calls": sum(len(s.tool_calls) for s in self.steps),
            "cost_complete": self.cost_complete,
        }
        if self.dropped_steps:
            summary["trajectory_dropped_steps"] = self.dropped_steps
        if self.problem:
            summary["trajectory_problem"] = self.problem
        return summary


def validate_trajectory(doc: Any) -> Trajectory:
    """`valid`: an object whose `steps` is a list of valid steps. `partial`: some steps were
    invalid and dropped (the rest kept). `invalid`: not an object with a list of steps, or not one
    of a non-empty list of steps is valid."""
    steps = doc.get("steps") if isinstance(doc, dict) else None
    if not isinstance(steps, list):
        return Trajectory(TrajectoryStatus.INVALID, problem="expected an object with a list `steps`")
    kept: list[Step] = []
    raws: list[dict[str, Any]] = []
    first: str | None = None
    for index, raw in enumerate(steps):
        try:
            kept.append(Step.model_validate(raw))
            raws.append(raw)
        except ValidationError as exc:
            if first is None:
                error = exc.errors(include_url=False)[0]
                where = ".".join(str(p) for p in error["loc"]) or "step"
                first = f"steps.{index}: {where}: {error['msg']}"
    dropped = len(steps) - len(kept)
    if not dropped:
        return Trajectory(TrajectoryStatus.VALID, kept, raw=raws)
    if not kept:
        return Trajectory(TrajectoryStatus.INVALID, dropped_steps=dropped, problem=first)
    return Trajectory(TrajectoryStatus.PARTIAL, kept, dropped_steps=dropped, problem=first, raw=raws)


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
    TypeError) on any other shape; whether a local file exists is `_local_problem`'s to say."""
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


def _local_file(base_dir: Path | None, name: str) -> Path | None:
    """The local fixture file a dataset row names, or None when it lies outside the spec's folder
    (the working directory without one): rows are data, and `/proc/self/environ` or `~/.ssh`
    must never be uploaded to a harness."""
    root = (base_dir or Path.cwd()).resolve()
    path = (root / name).resolve()
    return path if path.is_relative_to(root) else None


def _local_problem(base_dir: Path | None, files: list[dict[str, str]]) -> str | None:
    """Why the item's first unusable local fixture file cannot be uploaded, if one is."""
    for entry in files:
        if "file" in entry:
            path = _local_file(base_dir, entry["file"])
            if path is None:
                return f"fixture file {entry['file']!r} is outside the spec's folder: not uploaded"
            if not path.is_file():
                return f"fixture file {entry['file']!r} not found (looked for {path})"
    return None


def _validator(schema: dict[str, Any] | bool | None) -> jsonschema.protocols.Validator | None:
    if schema is None:
        return None
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return cls(schema)


def _input_problem(validator: jsonschema.protocols.Validator | None, value: Any) -> str | None:
    if validator is None:
        return None
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "input" + "".join(f"[{p!r}]" for p in error.absolute_path)
    return f"{where}: {error.message}"


def _capped(problems: list[str]) -> list[str]:
    if len(problems) <= _MAX_PROBLEMS:
        return problems
    return [*problems[:_MAX_PROBLEMS], f"... and {len(problems) - _MAX_PROBLEMS} more items"]


def _is_timeout(exc: httpx.TransportError) -> bool:
    # httpx-aiohttp maps every aiohttp connection error to ConnectTimeout; the cause tells the truth.
    cause = exc.__cause__
    if cause is not None:
        return isinstance(cause, asyncio.TimeoutError)
    return isinstance(exc, httpx.TimeoutException)


def _retry_after(value: str | None) -> float | None:
    try:
        return None if value is None else max(0.0, float(value))
    except ValueError:
        return None


def _error_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        return value["message"]
    return value if isinstance(value, str) else json.dumps(value, default=str)


def _response_error(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        body = None
    message = _error_text(body.get("error")) if isinstance(body, dict) else ""
    return (message or response.text or response.reason_phrase)[:300]


def _usable_run_id(value: Any) -> bool:
    return (
        isinstance(value, str)
        and 0 < len(value) <= _MAX_RUN_ID
        and value not in (".", "..")
        and not re.search(r"[/\\\x00-\x1f\x7f]", value)
    )


class HttpAgent:
    """Runs each item as one harness run and waits for it to end.

    Args:
        spec: the target spec.
        concurrency: the run's concurrency; the connection pool is as wide.
        seed: the run's seed (not sent: the protocol has no seed).
        run_id: the Assay run's id, sent in each run's metadata.
        capabilities: a snapshot `prepare` returned earlier (a resumed run): it is used as is
            and the harness is not asked again. A bare `GET /capabilities` document works too.
        store: the run's store. With `run_id`, each completed attempt's artifacts and
            trajectory are kept in `store.artifacts_dir(run_id, item_id, trial)`, and every
            harness run id is recorded, so an id reused even across a resume is caught.
        base_dir: the folder local fixture files (`{path, file}`) are relative to (the spec's).
        transport: an httpx transport to use instead of aiohttp's (tests).
    """

    instrumented = False

    def __init__(
        self,
        spec: HttpAgentTarget,
        *,
        concurrency: int,
        seed: int = 0,
        run_id: str | None = None,
        capabilities: dict[str, Any] | None = None,
        store: Store | None = None,
        base_dir: str | os.PathLike[str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._spec = spec
        self._seed = seed
        self._run_id = run_id
        self._store = store if run_id is not None else None
        self._base_dir = Path(base_dir) if base_dir is not None else None
        self._provider = f"http_agent:{urlsplit(spec.base_url).netloc}"
        headers = {"accept": "application/json"}
        if spec.api_key_env:
            # Read here and kept only in the client's headers: never in a record, a log or argv.
            headers["authorization"] = f"Bearer {os.environ.get(spec.api_key_env, '')}"
        self._client = httpx.AsyncClient(
            base_url=spec.base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(spec.request_timeout),
            transport=transport or AiohttpTransport(limits=httpx.Limits(max_connections=concurrency)),
        )
        self._snapshot: dict[str, Any] | None = None
        self._caps: Capabilities | None = None
        self._validator: jsonschema.protocols.Validator | None = None
        self._caps_lock = asyncio.Lock()
        self._slots: asyncio.Semaphore | None = None
        # Harness run id -> the attempt it was returned for; with a store, loaded from (and added
        # to) the run's ledger, so ids handed out before a resume count too.
        self._ledger = self._store.run_sidecar(run_id, _LEDGER) if self._store and run_id else None
        self._seen: dict[str, str] = _read_ledger(self._ledger) if self._ledger else {}
        self._background: set[asyncio.Task[None]] = set()
        # (item id, trial) whose folder this process has cleared: cleared once, at the attempt's
        # first harness run, so a session's later runs add to it rather than wipe it.
        self._cleared: set[tuple[str, int]] = set()
        if capabilities is not None:
            doc = capabilities.get("capabilities", capabilities)
            try:
                self._adopt(doc, fetched_at=capabilities.get("fetched_at"))
            except (ValidationError, jsonschema.exceptions.SchemaError) as exc:
                raise HarnessError(f"the stored capabilities snapshot is not valid: {exc}") from None

    # -- capabilities ---------------------------------------------------------------------------

    def _adopt(self, doc: Any, *, fetched_at: str | None) -> None:
        caps = Capabilities.model_validate(doc)
        validator = _validator(caps.input_schema)
        self._caps, self._validator = caps, validator
        limit = caps.limits.max_concurrent_runs
        self._slots = asyncio.Semaphore(limit) if limit is not None else None
        self._snapshot = {
            "protocol": PROTOCOL,
            "base_url": self._spec.base_url,
            "fetched_at": fetched_at or datetime.now(UTC).isoformat(),
            "capabilities": caps.model_dump(mode="json"),
        }

    async def _capabilities(self) -> Capabilities:
        """The harness's capabilities: the snapshot's, else fetched once (raises TargetFailure)."""
        if self._caps is not None:
            return self._caps
        async with self._caps_lock:
            if self._caps is None:
                response = await self._request("GET", "/capabilities", what="GET /capabilities")
                doc = self._json(response, "GET /capabilities")
                try:
                    self._adopt(doc, fetched_at=None)
                except ValidationError as exc:
                    raise self._failure(
                        f"GET /capabilities: not what the protocol says: {_first_error(exc)}",
                        FailureKind.PROTOCOL,
                    ) from None
                except jsonschema.exceptions.SchemaError as exc:
                    raise self._failure(
                        f"GET /capabilities: input_schema is not a valid JSON Schema: {exc.message}",
                        FailureKind.PROTOCOL,
                    ) from None
        assert self._caps is not None
        return self._caps

    async def prepare(self, items: list[Item]) -> dict[str, Any]:
        """Read the harness's capabilities (once) and check the items against them.

        Returns the snapshot the run stores: `protocol`, `base_url`, `fetched_at`,
        `capabilities`, `dropped_items` (`[{item_id, reason}]`: items with fixture files the
        harness cannot take; the caller skips them) and `warnings` (e.g. a model override the
        harness does not accept: `model` is then never sent).

        Raises:
            HarnessError: the capabilities could not be fetched or are not valid.
            DatasetError: items whose `files` field is malformed or whose input fails the
                harness's `input_schema` (all of them, in one error), or nothing left to run.
        """
        try:
            caps = await self._capabilities()
        except TargetFailure as failure:
            raise HarnessError(failure.message, source=self._spec.base_url) from None
        assert self._snapshot is not None
        problems: list[str] = []
        dropped: list[dict[str, str]] = []
        runnable: list[Item] = []
        for item in items:
            try:
                files = item_files(item)
            except (ValueError, TypeError) as exc:
                problems.append(f"item {item.item_id!r}: {exc}")
                continue
            reason = self._files_refused(caps, files)
            if reason:
                dropped.append({"item_id": item.item_id, "reason": reason})
                continue
            missing = _local_problem(self._base_dir, files)
            if missing:
                problems.append(f"item {item.item_id!r}: field 'files': {missing}")
            runnable.append(item)
        for item in runnable:
            problem = _input_problem(self._validator, item.input)
            if problem:
                problems.append(f"item {item.item_id!r}: {problem} (the harness's input_schema)")
        if problems:
            raise DatasetError(_capped(problems), source=self._spec.base_url)
        if items and not runnable:
            raise DatasetError(
                f"nothing to run: every item has fixture files and {dropped[0]['reason']}",
                source=self._spec.base_url,
            )
        return {**self._snapshot, "dropped_items": dropped, "warnings": self._warnings(caps)}

    def _warnings(self, caps: Capabilities) -> list[str]:
        if self._spec.model is not None and not caps.accepts.model_override:
            return [
                (
                    f"the harness does not accept a model override: target.model {self._spec.model!r} "
                    "is not sent and the harness runs its default model"
                )
            ]
        return []

    @staticmethod
    def _files_refused(caps: Capabilities, files: list[dict[str, str]]) -> str | None:
        """Why the harness cannot take the item's fixture files, if it cannot. A harness that
        takes files at all takes uploads (local files); URLs only if it says so."""
        if not files:
            return None
        if not caps.accepts.file_input:
            return "the harness accepts no fixture files"
        if not caps.accepts.file_urls and any("url" in f for f in files):
            # Assay does not fetch a URL to upload its bytes: the harness is the one to fetch it.
            return "the harness accepts fixture files only as uploads, and the item's files are URLs"
        return None

    # -- one item -------------------------------------------------------------------------------

    def item_prompt(self, item: Item) -> Any:
        return item.input

    async def __call__(self, item: Item, trial: int) -> TargetResult:
        return await self._invoke(item, trial, item.input, None)

    async def turn(self, item: Item, trial: int, prompt: Any, session: SessionState) -> TargetResult:
        """One prompt of a session: a harness run whose `input` is the prompt and whose
        `session_id` is the session's, so the harness continues the same conversation. A harness
        that does not accept sessions can take a first prompt (sent without `session_id`) but not
        a later one."""
        return await self._invoke(item, trial, prompt, session)

    async def _invoke(
        self, item: Item, trial: int, prompt: Any, session: SessionState | None
    ) -> TargetResult:
        caps = await self._capabilities()
        # Fixture files go with the session's first run; later runs find them in its workspace.
        first = session is None or not session.history
        try:
            files = item_files(item) if first else []
        except (ValueError, TypeError) as exc:
            raise self._failure(f"item {item.item_id!r}: {exc}", FailureKind.PROTOCOL) from None
        refused = self._files_refused(caps, files)
        if refused:
            raise self._failure(f"item has fixture files and {refused}", FailureKind.PROTOCOL)
        problem = _input_problem(self._validator, prompt)
        if problem:
            raise self._failure(f"{problem} (the harness's input_schema)", FailureKind.PROTOCOL)
        body: dict[str, Any] = {"input": prompt}
        if session is not None:
            if caps.accepts.sessions:
                body["session_id"] = session.session_id
            elif not first:
                raise self._failure(
                    "the harness does not accept sessions (capabilities accepts.sessions is false): "
                    "cannot resume a session",
                    FailureKind.PROTOCOL,
                )
        if self._spec.model is not None and caps.accepts.model_override:
            body["model"] = self._spec.model
        metadata: dict[str, Any] = {"item_id": item.item_id, "trial": trial}
        if self._run_id is not None:
            metadata = {"run_id": self._run_id, **metadata}
        body["metadata"] = metadata
        urls = [f for f in files if "url" in f]
        if urls:
            body["files"] = urls
        uploads = self._read_uploads(item, [f for f in files if "file" in f])
        if uploads:
            body["uploads"] = [
                {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                for path, data in uploads
            ]
        if self._slots is None:
            return await self._run(caps, item, trial, body, uploads)
        async with self._slots:
            return await self._run(caps, item, trial, body, uploads)

    def _read_uploads(self, item: Item, local: list[dict[str, str]]) -> list[tuple[str, bytes]]:
        """The bytes of the item's local fixture files, read before the run starts (read whole:
        fixtures are small, and a retried start must send the same bytes)."""
        uploads = []
        for entry in local:
            path = _local_file(self._base_dir, entry["file"])
            if path is None:
                raise self._failure(
                    f"item {item.item_id!r}: fixture file {entry['file']!r} is outside the spec's folder",
                    FailureKind.PROTOCOL,
                )
            try:
                uploads.append((entry["path"], path.read_bytes()))
            except OSError as exc:
                raise self._failure(
                    f"item {item.item_id!r}: fixture file {entry['file']!r} cannot be read "
                    f"({path}): {exc.strerror or exc}",
                    FailureKind.EXCEPTION,
                ) from None
        return uploads

    async def _run(
        self,
        caps: Capabilities,
        item: Item,
        trial: int,
        body: dict[str, Any],
        uploads: list[tuple[str, bytes]],
    ) -> TargetResult:
        started = time.perf_counter()
        folder = self._attempt_dir(item, trial)
        if folder is not None and (item.item_id, trial) not in self._cleared:
            # A killed earlier execution of this item x trial may have left files: start clean.
            self._cleared.add((item.item_id, trial))
            _clear(folder)
        harness_id: str | None = None
        deadline = asyncio.timeout(self._spec.timeout)
        try:
            async with deadline:
                harness_id = await self._start(item, trial, body, uploads)
                try:
                    state = await self._poll(harness_id)
                except TargetFailure as failure:
                    # We lost track of a run that may still be going (and paying): stop it.
                    if await self._cancel(caps, harness_id):
                        failure.message += "; cancelled the run"
                        failure.args = (failure.message,)
                    raise
        except TimeoutError:
            if not deadline.expired():
                raise
            if harness_id is None:
                raise self._failure(
                    f"the harness did not accept the run within {self._spec.timeout:g}s (target.timeout)",
                    FailureKind.TIMEOUT,
                    retryable=True,
                ) from None
            cancelled = await self._cancel(caps, harness_id)
            trajectory = await self._trajectory(caps, harness_id)
            raise self._failure(
                f"harness run {harness_id} did not finish within {self._spec.timeout:g}s (target.timeout)"
                + ("; cancelled it" if cancelled else ""),
                FailureKind.TIMEOUT,
                retryable=True,
                usage=self._spend(harness_id, "running", trajectory),
            ) from None
        except asyncio.CancelledError:
            # Ctrl-C, item_timeout or a Prefect cancel: the harness run must not go on paying.
            if harness_id is not None and caps.accepts.cancel:
                task = asyncio.ensure_future(self._cancel(caps, harness_id))
                self._background.add(task)
                task.add_done_callback(self._background.discard)
            raise
        wall_ms = (time.perf_counter() - started) * 1000
        trajectory = await self._trajectory(caps, harness_id)
        if state.status != "completed":
            kind = FailureKind.TIMEOUT if state.status == "timeout" else FailureKind.EXCEPTION
            error = _error_text(state.error) or "no error given"
            failure = self._failure(
                f"harness run {harness_id} ended {state.status}: {error}"[:1000],
                kind,
                retryable=state.status == "timeout",
                usage=self._spend(harness_id, state.status, trajectory),
            )
            # A failed run's trajectory is the evidence of what went wrong: kept (its files not).
            if folder is not None and trajectory.kept:
                failure.artifacts, _ = await self._keep(
                    caps, harness_id, folder / _run_folder(harness_id), [], trajectory
                )
            raise failure
        if state.answer is None and state.output is None:
            raise self._failure(
                f"harness run {harness_id} completed with neither `answer` nor `output`",
                FailureKind.PROTOCOL,
                usage=self._spend(harness_id, state.status, trajectory),
            )
        metadata: dict[str, Any] = {"harness_run_id": harness_id, "status": state.status}
        metadata.update(trajectory.summary())
        if state.answer is not None and state.output is not None:
            metadata["structured_output"] = state.output
        artifacts, warnings = _artifacts(state.artifacts)
        if artifacts:
            metadata["artifacts"] = artifacts
        kept: list[str] | None = None
        if folder is not None:
            try:
                kept, more = await self._keep(
                    caps, harness_id, folder / _run_folder(harness_id), artifacts, trajectory
                )
            except BaseException:
                # Cut short (item_timeout, Ctrl-C, a full disk): this harness run keeps nothing.
                _clear(folder / _run_folder(harness_id))
                raise
            warnings += more
        warnings += self._warnings(caps)
        if warnings:
            metadata["warnings"] = warnings
        return TargetResult(
            output=state.answer if state.answer is not None else state.output,
            model=state.model or body.get("model"),
            wire_ms=wall_ms,
            caller_cost=trajectory.cost,
            caller_metadata=metadata,
            caller_reserved={"tokens": trajectory.tokens()},
            steps=trajectory.step_count,
            tool_calls=trajectory.tool_call_count,
            artifacts=kept or None,
            trajectory=trajectory.raw if trajectory.kept else None,
        )

    # -- what an attempt keeps ------------------------------------------------------------------

    def _attempt_dir(self, item: Item, trial: int) -> Path | None:
        if self._store is None or self._run_id is None:
            return None
        return self._store.artifacts_dir(self._run_id, item.item_id, trial)

    async def _keep(
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
        assert self._store is not None and self._run_id is not None
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
            document = {
                "harness_run_id": harness_id,
                "status": trajectory.status,
                "dropped_steps": trajectory.dropped_steps,
                "problem": trajectory.problem,
                "steps": trajectory.raw,
            }
            path = folder / _TRAJECTORY
            write_atomic(path, json.dumps(document, ensure_ascii=False, default=str).encode())
            kept.append(path)
        root = self._store.artifacts_root
        return sorted(p.relative_to(root).as_posix() for p in kept), warnings

    async def _download_all(
        self, harness_id: str, root: Path, artifacts: list[dict[str, Any]]
    ) -> tuple[list[Path], list[str]]:
        """`GET /runs/{id}/files/{path}` of each artifact into `root`, within the size limits.
        A file that fails or passes a limit is skipped with a warning; the rest still come."""
        per_file, left = self._spec.max_artifact_bytes, self._spec.max_attempt_bytes
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
                warnings.append(_too_large(path, size, "max_attempt_bytes", self._spec.max_attempt_bytes))
                continue
            limit = min(per_file, left)
            try:
                written = await self._download(harness_id, path, dest, limit)
            except _TooLarge as exc:
                if limit == per_file or (exc.seen is not None and exc.seen > per_file):
                    warnings.append(_too_large(path, exc.seen, "max_artifact_bytes", per_file))
                else:
                    warnings.append(
                        _too_large(path, exc.seen, "max_attempt_bytes", self._spec.max_attempt_bytes)
                    )
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
        response = await self._request("GET", url, what=what, stream=True)
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

    def _spend(self, harness_id: str, status: str, trajectory: Trajectory) -> dict[str, Any]:
        """What a failed run reports it spent (for `TargetFailure.usage`): paid work may precede a
        failure, so the figures travel with it."""
        return {
            "harness_run_id": harness_id,
            "status": status,
            "cost_usd": trajectory.cost,
            "tokens": trajectory.tokens(),
            **trajectory.summary(),
        }

    async def _start(
        self, item: Item, trial: int, body: dict[str, Any], uploads: list[tuple[str, bytes]]
    ) -> str:
        """`POST /runs`: JSON, or with local fixture files multipart/form-data (an `input` part
        holding the same JSON, then one `file` part per upload, in `uploads` order)."""
        content = json.dumps(body, ensure_ascii=False, default=str).encode()
        # The same key on every retry of this POST: a harness that honours it starts one run only.
        headers = {"idempotency-key": uuid.uuid4().hex}
        files: list[tuple[str, tuple[str | None, bytes, str]]] | None = None
        if uploads:
            files = [("input", (None, content, "application/json"))]
            files += [("file", (path, data, "application/octet-stream")) for path, data in uploads]
            content = None  # httpx sets the multipart content type with its boundary
        else:
            headers["content-type"] = "application/json"
        response = await self._request(
            "POST",
            "/runs",
            what="POST /runs",
            content=content,
            files=files,
            headers=headers,
            idempotent=False,
        )
        doc = self._json(response, "POST /runs")
        harness_id = doc.get("id") if isinstance(doc, dict) else None
        if harness_id is None:
            raise self._failure(
                f"POST /runs: the reply has no run `id`: {response.text[:200]!r}", FailureKind.PROTOCOL
            )
        if not _usable_run_id(harness_id):
            raise self._failure(
                f"POST /runs: unusable run id {harness_id!r:.80} (expected a string without '/', "
                f"'\\' or control characters, at most {_MAX_RUN_ID} long)",
                FailureKind.PROTOCOL,
            )
        first = self._seen.get(harness_id)
        if first is not None:
            # Even for the same item and trial: every start must get a new id, and the old run's
            # results (or files) must never pass for this attempt's.
            raise self._failure(
                f"harness reused run id {harness_id} (already returned for {first})", FailureKind.PROTOCOL
            )
        self._seen[harness_id] = _owner(item.item_id, trial)
        if self._ledger is not None:
            # Written before the run is polled: a process killed now still leaves the id behind.
            self._ledger.parent.mkdir(parents=True, exist_ok=True)
            line = json.dumps({"id": harness_id, "item_id": item.item_id, "trial": trial}) + "\n"
            with self._ledger.open("a", encoding="utf-8") as ledger:
                ledger.write(line)
        return harness_id

    async def _poll(self, harness_id: str) -> RunState:
        path = f"/runs/{quote(harness_id, safe='')}"
        what = f"GET /runs/{harness_id}"
        while True:
            doc = self._json(await self._request("GET", path, what=what), what)
            try:
                state = RunState.model_validate(doc)
            except ValidationError as exc:
                raise self._failure(
                    f"{what}: not a run status: {_first_error(exc)}", FailureKind.PROTOCOL
                ) from None
            if state.status not in STATUSES:
                raise self._failure(
                    f"{what}: unknown status {state.status!r:.80}; expected one of {', '.join(sorted(STATUSES))}",
                    FailureKind.PROTOCOL,
                )
            if state.status in TERMINAL:
                return state
            await asyncio.sleep(self._spec.poll_interval)

    async def _trajectory(self, caps: Capabilities, harness_id: str) -> Trajectory:
        if not caps.provides.trajectory:
            return Trajectory(TrajectoryStatus.UNAVAILABLE, problem="the harness provides no trajectory")
        what = f"GET /runs/{harness_id}/trajectory"
        try:
            response = await self._request(
                "GET", f"/runs/{quote(harness_id, safe='')}/trajectory", what=what, ok_404=True
            )
        except TargetFailure as failure:
            return Trajectory(TrajectoryStatus.UNAVAILABLE, problem=failure.message)
        if response.status_code == 404:
            return Trajectory(TrajectoryStatus.UNAVAILABLE, problem=f"{what}: HTTP 404")
        try:
            doc = json.loads(response.content)
        except ValueError:
            return Trajectory(TrajectoryStatus.INVALID, problem=f"{what}: not JSON")
        return validate_trajectory(doc)

    async def _cancel(self, caps: Capabilities, harness_id: str) -> bool:
        """Ask the harness to cancel a run, once, if it accepts that; True if it said yes."""
        if not caps.accepts.cancel:
            return False
        try:
            response = await self._client.post(
                f"/runs/{quote(harness_id, safe='')}/cancel", timeout=_CANCEL_TIMEOUT_S
            )
        except httpx.HTTPError:
            return False
        return response.status_code < 300

    async def fetch_file(self, harness_id: str, path: str) -> bytes:
        """`GET /runs/{id}/files/{path}` for one artifact; refuses an unsafe path (ValueError)."""
        if not is_safe_path(path):
            raise ValueError(f"unsafe artifact path {path!r}: not fetched")
        what = f"GET /runs/{harness_id}/files/{path}"
        response = await self._request(
            "GET", f"/runs/{quote(harness_id, safe='')}/files/{quote(path, safe='/')}", what=what
        )
        return response.content

    # -- HTTP -----------------------------------------------------------------------------------

    async def _request(
        self,
        method: str,
        path: str,
        *,
        what: str,
        content: bytes | None = None,
        files: list[tuple[str, tuple[str | None, bytes, str]]] | None = None,
        headers: dict[str, str] | None = None,
        idempotent: bool = True,
        ok_404: bool = False,
        stream: bool = False,
    ) -> httpx.Response:
        """One request with retries on 429 / 5xx (and, when idempotent, connection errors).

        Args:
            stream: return the successful response unread; the caller reads and closes it.
        """
        attempt = 0
        while True:
            retry_after: float | None = None
            try:
                # Built anew for each attempt: a multipart body is a stream, consumed once.
                request = self._client.build_request(
                    method, path, content=content, files=files, headers=headers
                )
                response = await self._client.send(request, stream=stream)
            except httpx.TransportError as exc:
                timeout = _is_timeout(exc)
                message = (
                    f"{what}: timed out after {self._spec.request_timeout:g}s (target.request_timeout)"
                    if timeout
                    else f"{what}: connection error: {exc or type(exc).__name__}"
                )
                failure = self._failure(
                    message, FailureKind.TIMEOUT if timeout else FailureKind.CONNECTION, retryable=True
                )
                # A POST that may have reached the harness is not sent again: it could start a second run.
                if not idempotent or attempt >= self._spec.max_retries:
                    raise failure from None
            else:
                if response.status_code < 400 or (ok_404 and response.status_code == 404):
                    return response
                if stream:
                    await response.aread()
                    await response.aclose()
                retryable = response.status_code in _RETRYABLE_STATUS
                failure = self._failure(
                    f"{what}: HTTP {response.status_code}: {_response_error(response)}",
                    FailureKind.HTTP,
                    retryable=retryable,
                    http_status=response.status_code,
                    request_id=response.headers.get("x-request-id"),
                )
                if not retryable or attempt >= self._spec.max_retries:
                    raise failure
                retry_after = _retry_after(response.headers.get("retry-after"))
            attempt += 1
            if retry_after is None:
                backoff = min(_BACKOFF_MAX_S, _BACKOFF_BASE_S * 2 ** (attempt - 1))
                retry_after = backoff * (0.5 + random.random() / 2)
            await asyncio.sleep(min(retry_after, _MAX_RETRY_AFTER_S))

    def _json(self, response: httpx.Response, what: str) -> Any:
        try:
            doc = json.loads(response.content)
        except ValueError:
            raise self._failure(
                f"{what}: the reply is not JSON: {response.text[:200]!r}",
                FailureKind.PROTOCOL,
                http_status=response.status_code,
            ) from None
        if not isinstance(doc, dict):
            raise self._failure(
                f"{what}: expected a JSON object, got {type(doc).__name__}",
                FailureKind.PROTOCOL,
                http_status=response.status_code,
            )
        return doc

    def _failure(
        self,
        message: str,
        kind: FailureKind,
        *,
        retryable: bool = False,
        http_status: int | None = None,
        request_id: str | None = None,
        usage: Any = None,
    ) -> TargetFailure:
        return TargetFailure(
            message,
            kind=kind,
            provider=self._provider,
            http_status=http_status,
            retryable=retryable,
            request_id=request_id,
            usage=usage,
        )

    async def aclose(self) -> None:
        if self._background:
            # Cancels sent on the way out (Ctrl-C): give them a moment before the pool closes.
            await asyncio.wait(self._background, timeout=_CANCEL_TIMEOUT_S)
        await self._client.aclose()


def prepare_http_agent(
    spec: HttpAgentTarget,
    items: list[Item],
    *,
    stored: dict[str, Any] | None = None,
    base_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """`HttpAgent.prepare` for synchronous callers (planning, before anything is written): runs it
    on its own event loop in a worker thread, so it works whether or not a loop is running here.

    Args:
        spec: the target spec.
        items: the run's items.
        stored: the run's stored snapshot (a resumed run): used as is, the harness is not asked.
        base_dir: the folder local fixture files are relative to (the spec's); they must exist.

    Raises:
        HarnessError, DatasetError: as `HttpAgent.prepare`.
    """

    async def prepare() -> dict[str, Any]:
        agent = HttpAgent(spec, concurrency=1, capabilities=stored, base_dir=base_dir)
        try:
            return await agent.prepare(items)
        finally:
            await agent.aclose()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="http-agent-prepare") as pool:
        return pool.submit(asyncio.run, prepare()).result()


def _run_folder(harness_id: str) -> str:
    """The folder of one harness run's files inside its item x trial's: the run id, quoted into
    one path segment (ids are unique within an Assay run: the ledger sees to it), or a hash of a
    long one, which would not fit a file name."""
    quoted = quote(harness_id, safe="")
    return quoted if len(quoted) <= 100 else f"run-{hashlib.sha256(harness_id.encode()).hexdigest()[:16]}"


def _owner(item_id: Any, trial: Any) -> str:
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
            seen.setdefault(entry["id"], _owner(entry.get("item_id"), entry.get("trial")))
    return seen


def _clear(folder: Path) -> None:
    if folder.is_dir():
        shutil.rmtree(folder)
    elif folder.exists():
        folder.unlink()


class _TooLarge(Exception):
    """An artifact past the size limit; `seen`: its declared size, if the harness said one."""

    def __init__(self, seen: int | None) -> None:
        super().__init__(seen)
        self.seen = seen


def _too_large(path: str, size: int | None, setting: str, limit: int) -> str:
    what = f"{size} bytes" if size is not None else "larger"
    return f"artifact {path!r:.200} not downloaded: {what}, past target.{setting} ({limit})"


def _artifacts(raw: list[Any] | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The listed artifacts with safe paths, and a warning for each one skipped."""
    kept: list[dict[str, Any]] = []
    warnings: list[str] = []
    for entry in raw or []:
        try:
            artifact = Artifact.model_validate(entry)
        except ValidationError as exc:
            warnings.append(f"artifact {entry!r:.80} skipped: {_first_error(exc)}")
            continue
        if not is_safe_path(artifact.path):
            warnings.append(f"artifact {artifact.path!r:.200} skipped: unsafe path (absolute or with '..')")
            continue
        kept.append(artifact.model_dump(exclude_none=True))
    return kept, warnings


def _first_error(exc: ValidationError) -> str:
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]
