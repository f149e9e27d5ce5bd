"""The `http_agent` target's run lifecycle: one harness run per item x trial (or per prompt of a
session) — capabilities read once, the run started, polled to its end, cancelled when Assay loses
track of it or gives up, its trajectory fetched, and what it left kept (`_artifacts`).

The harness's HTTP client (httpx) is imported when an agent is opened, not with this module:
every run imports the targets registry, and only an http_agent run needs it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import os
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from pydantic import ValidationError

from assay.calls.http import ResponseHook
from assay.errors import HarnessError, TargetFailure
from assay.outcomes import FailureKind, TrajectoryStatus
from assay.spec import HttpAgentTarget
from assay.spec.dataset import Item
from assay.store import Store
from assay.targets._base import SessionState, TargetResult
from assay.targets.http_agent._artifacts import LEDGER, Keeper, RunIds, clear, listed_artifacts, run_folder
from assay.targets.http_agent._checks import check_items, model_warnings
from assay.targets.http_agent._files import (
    files_refused,
    is_safe_path,
    item_files,
    read_uploads,
)
from assay.targets.http_agent._protocol import (
    MAX_RUN_ID,
    PROTOCOL,
    STATUSES,
    TERMINAL,
    Capabilities,
    CapabilitiesError,
    RunState,
    error_text,
    first_error,
    input_problem,
    read_capabilities,
    usable_run_id,
)
from assay.targets.http_agent._trajectory import REFETCH_AT_ONCE, Trajectory, refetched, validate_trajectory

if TYPE_CHECKING:
    import httpx
    from jsonschema.protocols import Validator

_CANCEL_WAIT_S = 5.0


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
        spec_dir: the folder local fixture files (`{path, file}`) are relative to (the spec's).
        transport: an httpx transport to use instead of aiohttp's (tests).
        on_response: called with every HTTP attempt's status and headers (`assay.calls.http`).
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
        spec_dir: str | os.PathLike[str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        on_response: ResponseHook | None = None,
    ) -> None:
        self._spec = spec
        self._seed = seed
        self._run_id = run_id
        self._store = store if run_id is not None else None
        self._spec_dir = Path(spec_dir) if spec_dir is not None else None
        from assay.targets.http_agent._client import HarnessClient

        self._client = HarnessClient(
            spec, concurrency=concurrency, transport=transport, on_response=on_response
        )
        self._peer = self._client.peer
        self._keeper = Keeper(self._client, self._store, spec) if self._store is not None else None
        self._snapshot: dict[str, Any] | None = None
        self._caps: Capabilities | None = None
        self._validator: Validator | None = None
        self._caps_lock = asyncio.Lock()
        self._slots: asyncio.Semaphore | None = None
        # With a store, loaded from (and added to) the run's ledger, so ids handed out before a
        # resume count too.
        self._run_ids = RunIds(self._store.run_sidecar(run_id, LEDGER) if self._store and run_id else None)
        self._background: set[asyncio.Task[None]] = set()
        self._refetching = asyncio.Semaphore(REFETCH_AT_ONCE)
        # (item id, trial) whose folder this process has cleared: cleared once, at the attempt's
        # first harness run, so a session's later runs add to it rather than wipe it.
        self._cleared: set[tuple[str, int]] = set()
        if capabilities is not None:
            doc = capabilities.get("capabilities", capabilities)
            try:
                self._adopt(doc, fetched_at=capabilities.get("fetched_at"))
            except CapabilitiesError as exc:
                raise HarnessError(f"the stored capabilities snapshot is not valid: {exc}") from None

    # -- capabilities ---------------------------------------------------------------------------

    def _adopt(self, doc: Any, *, fetched_at: str | None) -> None:
        caps, validator = read_capabilities(doc)
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
                response = await self._client.request("GET", "/capabilities", what="GET /capabilities")
                doc = self._client.json(response, "GET /capabilities")
                try:
                    self._adopt(doc, fetched_at=None)
                except CapabilitiesError as exc:
                    raise self._peer.failure(f"GET /capabilities: {exc}", FailureKind.PROTOCOL) from None
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
        dropped = check_items(
            caps, self._validator, items, spec_dir=self._spec_dir, source=self._spec.base_url
        )
        return {**self._snapshot, "dropped_items": dropped, "warnings": model_warnings(self._spec, caps)}

    # -- one item -------------------------------------------------------------------------------

    def item_prompt(self, item: Item) -> Any:
        return item.input

    async def __call__(self, item: Item, trial: int) -> TargetResult:
        return await self._counted(item, trial, item.input, None)

    async def turn(self, item: Item, trial: int, prompt: Any, session: SessionState) -> TargetResult:
        """One prompt of a session: a harness run whose `input` is the prompt and whose
        `session_id` is the session's, so the harness continues the same conversation. A harness
        that does not accept sessions can take a first prompt (sent without `session_id`) but not
        a later one."""
        return await self._counted(item, trial, prompt, session)

    async def _counted(
        self, item: Item, trial: int, prompt: Any, session: SessionState | None
    ) -> TargetResult:
        """`_invoke`, its `retries` (success or failure) the failed attempts of its requests."""
        from assay.targets.http_agent._client import counting_retries  # httpx: loaded with the client

        with counting_retries() as retried:
            try:
                result = await self._invoke(item, trial, prompt, session)
            except TargetFailure as failure:
                failure.retries = retried[0]
                raise
        return dataclasses.replace(result, retries=retried[0])

    async def _invoke(
        self, item: Item, trial: int, prompt: Any, session: SessionState | None
    ) -> TargetResult:
        caps = await self._capabilities()
        # Fixture files go with the session's first run; later runs find them in its workspace.
        first = session is None or not session.history
        try:
            files = item_files(item) if first else []
        except (ValueError, TypeError) as exc:
            raise self._peer.failure(f"item {item.item_id!r}: {exc}", FailureKind.PROTOCOL) from None
        refused = files_refused(caps, files)
        if refused:
            raise self._peer.failure(f"item has fixture files and {refused}", FailureKind.PROTOCOL)
        problem = input_problem(self._validator, prompt)
        if problem:
            raise self._peer.failure(f"{problem} (the harness's input_schema)", FailureKind.PROTOCOL)
        body: dict[str, Any] = {"input": prompt}
        if session is not None:
            if caps.accepts.sessions:
                body["session_id"] = session.session_id
            elif not first:
                raise self._peer.failure(
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
        uploads = read_uploads(self._peer, self._spec_dir, item, [f for f in files if "file" in f])
        if uploads:
            body["uploads"] = [
                {"path": path, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
                for path, data in uploads
            ]
        if self._slots is None:
            return await self._run(caps, item, trial, body, uploads)
        async with self._slots:
            return await self._run(caps, item, trial, body, uploads)

    def _item_dir(self, item: Item, trial: int) -> Path | None:
        if self._store is None or self._run_id is None:
            return None
        return self._store.artifacts_dir(self._run_id, item.item_id, trial)

    async def _run(
        self,
        caps: Capabilities,
        item: Item,
        trial: int,
        body: dict[str, Any],
        uploads: list[tuple[str, bytes]],
    ) -> TargetResult:
        started = time.perf_counter()
        folder = self._item_dir(item, trial)
        if folder is not None and (item.item_id, trial) not in self._cleared:
            # A killed earlier execution of this item x trial may have left files: start clean.
            self._cleared.add((item.item_id, trial))
            clear(folder)
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
                raise self._peer.failure(
                    f"the harness did not accept the run within {self._spec.timeout:g}s (target.timeout)",
                    FailureKind.TIMEOUT,
                    retryable=True,
                ) from None
            cancelled = await self._cancel(caps, harness_id)
            trajectory = await self._trajectory(caps, harness_id)
            raise self._peer.failure(
                f"harness run {harness_id} did not finish within {self._spec.timeout:g}s (target.timeout)"
                + ("; cancelled it" if cancelled else ""),
                FailureKind.TIMEOUT,
                retryable=True,
                usage=trajectory.spend(harness_id, "running"),
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
            error = error_text(state.error) or "no error given"
            failure = self._peer.failure(
                f"harness run {harness_id} ended {state.status}: {error}"[:1000],
                kind,
                retryable=state.status == "timeout",
                usage=trajectory.spend(harness_id, state.status),
            )
            # A failed run's trajectory is the evidence of what went wrong: kept (its files not).
            if folder is not None and trajectory.kept:
                failure.artifacts, _ = await self._keeper.keep(  # type: ignore[union-attr]
                    caps, harness_id, folder / run_folder(harness_id), [], trajectory
                )
            raise failure
        if state.answer is None and state.output is None:
            raise self._peer.failure(
                f"harness run {harness_id} completed with neither `answer` nor `output`",
                FailureKind.PROTOCOL,
                usage=trajectory.spend(harness_id, state.status),
            )
        metadata: dict[str, Any] = {"harness_run_id": harness_id, "status": state.status}
        metadata.update(trajectory.summary())
        if state.answer is not None and state.output is not None:
            metadata["structured_output"] = state.output
        artifacts, warnings = listed_artifacts(state.artifacts)
        if artifacts:
            metadata["artifacts"] = artifacts
        kept: list[str] | None = None
        if folder is not None:
            try:
                kept, more = await self._keeper.keep(  # type: ignore[union-attr]
                    caps, harness_id, folder / run_folder(harness_id), artifacts, trajectory
                )
            except BaseException:
                # Cut short (item_timeout, Ctrl-C, a full disk): this harness run keeps nothing.
                clear(folder / run_folder(harness_id))
                raise
            warnings += more
        warnings += model_warnings(self._spec, caps)
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
        response = await self._client.request(
            "POST",
            "/runs",
            what="POST /runs",
            content=content,
            files=files,
            headers=headers,
            idempotent=False,
        )
        doc = self._client.json(response, "POST /runs")
        harness_id = doc.get("id") if isinstance(doc, dict) else None
        if harness_id is None:
            raise self._peer.failure(
                f"POST /runs: the reply has no run `id`: {response.text[:200]!r}", FailureKind.PROTOCOL
            )
        if not usable_run_id(harness_id):
            raise self._peer.failure(
                f"POST /runs: unusable run id {harness_id!r:.80} (expected a string without '/', "
                f"'\\' or control characters, at most {MAX_RUN_ID} long)",
                FailureKind.PROTOCOL,
            )
        first = self._run_ids.owner(harness_id)
        if first is not None:
            # Even for the same item and trial: every start must get a new id, and the old run's
            # results (or files) must never pass for this attempt's.
            raise self._peer.failure(
                f"harness reused run id {harness_id} (already returned for {first})", FailureKind.PROTOCOL
            )
        self._run_ids.record(harness_id, item.item_id, trial)
        return harness_id

    async def _poll(self, harness_id: str) -> RunState:
        path = f"/runs/{quote(harness_id, safe='')}"
        what = f"GET /runs/{harness_id}"
        while True:
            doc = self._client.json(await self._client.request("GET", path, what=what), what)
            try:
                state = RunState.model_validate(doc)
            except ValidationError as exc:
                raise self._peer.failure(
                    f"{what}: not a run status: {first_error(exc)}", FailureKind.PROTOCOL
                ) from None
            if state.status not in STATUSES:
                raise self._peer.failure(
                    f"{what}: unknown status {state.status!r:.80}; expected one of {', '.join(sorted(STATUSES))}",
                    FailureKind.PROTOCOL,
                )
            if state.status in TERMINAL:
                return state
            await asyncio.sleep(self._spec.poll_interval)

    async def _trajectory(self, caps: Capabilities, harness_id: str) -> Trajectory:
        if not caps.provides.trajectory:
            return Trajectory(TrajectoryStatus.UNAVAILABLE, problem="the harness provides no trajectory")
        fetch = lambda: self._fetch_trajectory(harness_id)
        return await refetched(await fetch(), fetch, self._refetching, self._spec.poll_interval)

    async def _fetch_trajectory(self, harness_id: str) -> Trajectory:
        what = f"GET /runs/{harness_id}/trajectory"
        try:
            response = await self._client.request(
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
        return await self._client.post_once(f"/runs/{quote(harness_id, safe='')}/cancel")

    async def fetch_file(self, harness_id: str, path: str) -> bytes:
        """`GET /runs/{id}/files/{path}` for one artifact; refuses an unsafe path (ValueError)."""
        if not is_safe_path(path):
            raise ValueError(f"unsafe artifact path {path!r}: not fetched")
        what = f"GET /runs/{harness_id}/files/{path}"
        response = await self._client.request(
            "GET", f"/runs/{quote(harness_id, safe='')}/files/{quote(path, safe='/')}", what=what
        )
        return response.content

    # -- HTTP -----------------------------------------------------------------------------------

    async def aclose(self) -> None:
        if self._background:
            # Cancels sent on the way out (Ctrl-C): give them a moment before the pool closes.
            await asyncio.wait(self._background, timeout=_CANCEL_WAIT_S)
        await self._client.aclose()
