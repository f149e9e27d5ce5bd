"""A reference harness for tests: Assay's harness protocol (docs/harness-protocol.md) on 127.0.0.1.

Built on `aiohttp.web` and run like `assay.testing.mock_openai.MockOpenAIServer`: in a background thread
with its own event loop, every control call (`configure`, `stats`, `reset`) run on that loop so it
never races a request.

    with HarnessServer() as harness:
        harness.base_url                         # "http://127.0.0.1:<port>"
        harness.configure(behaviors={"q1": {"status": "failed", "error": "boom"}})
        harness.stats()

Knobs (`configure`; each key given replaces that setting):

- `capabilities`: the `GET /capabilities` document (default `DEFAULT_CAPABILITIES`).
  `capabilities_raw`: a text body sent instead (e.g. not JSON).
- `behaviors`: item id -> behaviour of the runs started for that item; the key `"*"` is the
  default. A behaviour is a dict of:
    - `delay` (s): the run is `queued` on its first poll, `running` until `delay` has passed.
    - `never_finish`: the run stays `running` until cancelled.
    - `status`: the final status (default `completed`); any text, so unknown statuses can be sent.
    - `error`: the run's `error` (any JSON).
    - `answer`: the final answer (default: the input echoed, as text); `None` leaves it out.
    - `answer_history`: answer with every input of the run's session so far, this one last,
      joined by `" > "` (a run without `session_id` is a session of one), so a test can see
      that a session continued.
    - `output`: a structured output.
    - `model`: the model the run reports.
    - `run_id`: answer `POST /runs` with this id (a harness reusing ids).
    - `create_reply`: answer `POST /runs` with this JSON object instead of `{"id": ...}`.
    - `bad_json`: a list of routes (`create`, `status`, `trajectory`) that answer with broken JSON.
    - `trajectory`: `"missing"` (404), `"invalid"` (`steps` not a list), `"partial"` (the
      generated steps plus invalid ones), a list of steps, or a whole document (an object, e.g.
      an ATIF trajectory, served as given); default: `steps` generated steps.
    - `trajectory_sequence`: a list of such `trajectory` values, one per fetch of the run's
      trajectory (the last repeated): a trajectory that becomes complete later.
    - `steps` (default 2), `step_cost` (USD, default 0.01; `None` leaves cost out): generated steps,
      each with one tool call and tokens `{input: 10, output: 5}`.
    - `artifacts`: the run's `artifacts` list; `files`: path -> text (or bytes) served by
      `/files/{path}`; `chunked_files`: serve them chunked, without a Content-Length.
- `faults`: a queue of `{route, status, times (default 1, -1 forever), retry_after}`; a request to
  `route` (`capabilities`, `create`, `status`, `trajectory`, `files`, `cancel`) takes the first
  matching fault and gets that HTTP status with `{"error": ...}`.
- `api_key`: when set, requests without `Authorization: Bearer <api_key>` get 401.

`POST /runs` as multipart/form-data (fixture file uploads): an `input` part holding the JSON body,
then one `file` part per entry of the body's `uploads` (`{path, size, sha256}`), in that order; the
harness checks each part's filename, size and sha256 against its entry (400 on a mismatch) and a
completed run's `output` is `{"files": {path: sha256 of the bytes received}}` (unless the
behaviour sets `output`).

`stats()`: `requests` (by route), `bodies` (every `POST /runs` body; a multipart one's `input`
part), `uploads` (per multipart start: path -> sha256 received), `headers` (per request: route,
authorization, idempotency-key, content-type), `cancelled` (run ids), `max_active` (most runs
started and not yet seen ending by a poll at once), `runs` (run id -> item id) and `sessions`
(session id -> the inputs of its runs, in order).

Sessions: a `POST /runs` with a `session_id` continues that session (the harness keeps each
session's history: the inputs of its runs); a new id starts one.
"""

from __future__ import annotations

import collections
import copy
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import BodyPartReader, web

from assay.testing._background import HOST, BackgroundServer, ServedApp, json_response

DEFAULT_CAPABILITIES: dict[str, Any] = {
    "accepts": {
        "file_input": True,
        "file_urls": True,
        "model_override": True,
        "cancel": True,
        "sessions": True,
    },
    "provides": {"trajectory": True, "workspace": True},
    "limits": {"max_concurrent_runs": 16},
}
_CONFIG_KEYS = {"capabilities", "capabilities_raw", "behaviors", "faults", "api_key"}
_ROUTES = {"capabilities", "create", "status", "trajectory", "files", "cancel"}
_BROKEN = "{not json"


@dataclass(slots=True)
class _Run:
    id: str
    item_id: str
    body: dict[str, Any]
    behavior: dict[str, Any]
    created: float = field(default_factory=time.monotonic)
    polls: int = 0
    cancelled: bool = False
    ended: bool = False
    history: list[Any] = field(default_factory=list)
    received: dict[str, str] | None = None  # uploaded path -> sha256
    trajectory_fetches: int = 0


def _broken() -> web.Response:
    return web.Response(text=_BROKEN, content_type="application/json")


def _echo(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _steps(behavior: dict[str, Any]) -> list[dict[str, Any]]:
    cost = behavior.get("step_cost", 0.01)
    steps = []
    for n in range(behavior.get("steps", 2)):
        step: dict[str, Any] = {
            "role": "assistant",
            "content": f"step {n}",
            "tool_calls": [{"name": "search", "arguments": {"q": n}}],
            "tokens": {"input": 10, "output": 5},
        }
        if cost is not None:
            step["cost_usd"] = cost
        steps.append(step)
    return steps


class ReferenceHarness(ServedApp):
    """The harness's state and routes; every method runs on the server's loop."""

    def __init__(self) -> None:
        self._next_id = 0
        self.reset()

    def reset(self) -> None:
        self._capabilities: dict[str, Any] = copy.deepcopy(DEFAULT_CAPABILITIES)
        self._capabilities_raw: str | None = None
        self._behaviors: dict[str, dict[str, Any]] = {}
        self._faults: list[dict[str, Any]] = []
        self._api_key: str | None = None
        self._runs: dict[str, _Run] = {}
        self._sessions: dict[str, list[Any]] = {}
        self._requests: collections.Counter[str] = collections.Counter()
        self._bodies: list[Any] = []
        self._uploads: list[dict[str, str]] = []
        self._headers: list[dict[str, Any]] = []
        self._cancelled: list[str] = []
        self._active = 0
        self._max_active = 0

    def configure(self, **settings: Any) -> None:
        unknown = set(settings) - _CONFIG_KEYS
        if unknown:
            raise ValueError(f"unknown settings {sorted(unknown)}; allowed: {sorted(_CONFIG_KEYS)}")
        for fault in settings.get("faults", []):
            if fault.get("route") not in _ROUTES:
                raise ValueError(f"fault route must be one of {sorted(_ROUTES)}: {fault!r}")
        if "capabilities" in settings:
            self._capabilities = copy.deepcopy(settings["capabilities"])
        if "capabilities_raw" in settings:
            self._capabilities_raw = settings["capabilities_raw"]
        if "behaviors" in settings:
            self._behaviors = copy.deepcopy(settings["behaviors"])
        if "faults" in settings:
            self._faults = [{"times": 1, **fault} for fault in settings["faults"]]
        if "api_key" in settings:
            self._api_key = settings["api_key"]

    def stats(self) -> dict[str, Any]:
        return {
            "requests": dict(self._requests),
            "bodies": copy.deepcopy(self._bodies),
            "uploads": copy.deepcopy(self._uploads),
            "headers": copy.deepcopy(self._headers),
            "cancelled": list(self._cancelled),
            "max_active": self._max_active,
            "runs": {run.id: run.item_id for run in self._runs.values()},
            "sessions": copy.deepcopy(self._sessions),
        }

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._gate])
        app.router.add_get("/capabilities", self._get_capabilities)
        app.router.add_post("/runs", self._create)
        app.router.add_get("/runs/{id}", self._status)
        app.router.add_get("/runs/{id}/trajectory", self._trajectory)
        app.router.add_get("/runs/{id}/files/{path:.*}", self._file)
        app.router.add_post("/runs/{id}/cancel", self._cancel)
        return app

    # -- routes --------------------------------------------------------------------------------

    @web.middleware
    async def _gate(self, request: web.Request, handler: Callable[..., Any]) -> web.StreamResponse:
        """Counts the request, checks the key, and serves a queued fault if one matches."""
        route = _route_of(request)
        self._requests[route] += 1
        self._headers.append(
            {
                "route": route,
                "authorization": request.headers.get("Authorization"),
                "idempotency_key": request.headers.get("Idempotency-Key"),
                "content_type": request.content_type,
            }
        )
        if self._api_key is not None and request.headers.get("Authorization") != f"Bearer {self._api_key}":
            return json_response({"error": "bad or missing API key"}, 401)
        for index, fault in enumerate(self._faults):
            if fault["route"] == route:
                if fault["times"] > 0:
                    fault["times"] -= 1
                    if fault["times"] == 0:
                        del self._faults[index]
                headers = {"Retry-After": str(fault["retry_after"])} if "retry_after" in fault else None
                if route == "create":  # a refused start still tells which item it was for
                    self._bodies.append((await _create_body(request))[0])
                return json_response({"error": f"fault: HTTP {fault['status']}"}, fault["status"], headers)
        return await handler(request)

    def _behavior(self, item_id: str) -> dict[str, Any]:
        return {**self._behaviors.get("*", {}), **self._behaviors.get(item_id, {})}

    async def _get_capabilities(self, request: web.Request) -> web.Response:
        if self._capabilities_raw is not None:
            return web.Response(text=self._capabilities_raw, content_type="application/json")
        return json_response(self._capabilities)

    async def _create(self, request: web.Request) -> web.Response:
        body, received, problem = await _create_body(request)
        self._bodies.append(body)
        if problem:
            return json_response({"error": problem}, 400)
        metadata = body.get("metadata") if isinstance(body, dict) else None
        if not isinstance(metadata, dict) or "input" not in body or "item_id" not in metadata:
            return json_response({"error": "expected {input, metadata: {item_id, trial}}"}, 400)
        accepts = self._capabilities.get("accepts", {})
        if received is not None:
            self._uploads.append(received)
            if not accepts.get("file_input"):
                return json_response({"error": "this harness does not accept file uploads"}, 400)
        if "model" in body and not accepts.get("model_override"):
            return json_response({"error": "this harness does not accept a model override"}, 400)
        if "files" in body and not accepts.get("file_urls"):
            return json_response({"error": "this harness does not accept file urls"}, 400)
        item_id = str(metadata["item_id"])
        behavior = self._behavior(item_id)
        if "create" in behavior.get("bad_json", ()):
            return _broken()
        if "create_reply" in behavior:
            return json_response(behavior["create_reply"], 201)
        self._next_id += 1
        run_id = behavior.get("run_id", f"run-{self._next_id}")
        if run_id not in self._runs:
            session_id = body.get("session_id")
            history = [body["input"]]
            if isinstance(session_id, str):
                history = self._sessions.setdefault(session_id, [])
                history.append(body["input"])
            self._runs[run_id] = _Run(
                run_id, item_id, body, behavior, history=list(history), received=received
            )
            self._active += 1
            self._max_active = max(self._max_active, self._active)
        return json_response({"id": run_id}, 201)

    def _run(self, request: web.Request) -> _Run | None:
        return self._runs.get(request.match_info["id"])

    def _state(self, run: _Run) -> str:
        behavior = run.behavior
        if run.cancelled:
            return "cancelled"
        if behavior.get("never_finish"):
            return "running"
        if time.monotonic() - run.created < behavior.get("delay", 0):
            return "queued" if run.polls <= 1 else "running"
        return behavior.get("status", "completed")

    async def _status(self, request: web.Request) -> web.Response:
        run = self._run(request)
        if run is None:
            return json_response({"error": "no such run"}, 404)
        run.polls += 1
        behavior = run.behavior
        if "status" in behavior.get("bad_json", ()):
            return _broken()
        status = self._state(run)
        reply: dict[str, Any] = {"id": run.id, "status": status}
        if status in ("queued", "running"):
            return json_response(reply)
        if not run.ended:
            run.ended = True
            self._active -= 1
        if status == "completed":
            if behavior.get("answer_history"):
                answer = " > ".join(_echo(text) for text in run.history)
            else:
                answer = behavior.get("answer", _echo(run.body["input"]))
            if answer is not None:
                reply["answer"] = answer
            if "output" in behavior:
                reply["output"] = behavior["output"]
            elif run.received is not None:
                reply["output"] = {"files": run.received}
        elif status == "cancelled":
            reply["error"] = behavior.get("error", "cancelled on request")
        elif "error" in behavior:
            reply["error"] = behavior["error"]
        if "model" in behavior:
            reply["model"] = behavior["model"]
        if "artifacts" in behavior:
            reply["artifacts"] = behavior["artifacts"]
        return json_response(reply)

    async def _trajectory(self, request: web.Request) -> web.Response:
        run = self._run(request)
        if run is None:
            return json_response({"error": "no such run"}, 404)
        behavior = run.behavior
        if "trajectory" in behavior.get("bad_json", ()):
            return _broken()
        kind = behavior.get("trajectory")
        sequence = behavior.get("trajectory_sequence")
        if sequence:  # one entry per fetch, the last repeated
            kind = sequence[min(run.trajectory_fetches, len(sequence) - 1)]
        run.trajectory_fetches += 1
        if isinstance(kind, dict):  # a whole document (an ATIF trajectory), as given
            return json_response(kind)
        if kind == "missing":
            return json_response({"error": "no trajectory for this run"}, 404)
        if kind == "invalid":
            return json_response({"steps": "not a list"})
        steps = _steps(behavior)
        if kind == "partial":
            steps += [{"content": "a step without a role"}, {"role": "tool", "cost_usd": -1}]
        elif isinstance(kind, list):
            steps = kind
        return json_response({"steps": steps})

    async def _file(self, request: web.Request) -> web.Response:
        run = self._run(request)
        files = run.behavior.get("files", {}) if run is not None else {}
        path = request.match_info["path"]
        if path not in files:
            return json_response({"error": "no such file"}, 404)
        content = files[path]
        data = content if isinstance(content, bytes) else content.encode()
        if not run.behavior.get("chunked_files"):  # type: ignore[union-attr]
            return web.Response(body=data, content_type="application/octet-stream")
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(data), 256):
            await response.write(data[start : start + 256])
        await response.write_eof()
        return response

    async def _cancel(self, request: web.Request) -> web.Response:
        run = self._run(request)
        if run is None:
            return json_response({"error": "no such run"}, 404)
        run.cancelled = True
        self._cancelled.append(run.id)
        return json_response({"id": run.id, "status": "cancelled"}, 202)


def _route_of(request: web.Request) -> str:
    parts = request.path.strip("/").split("/")
    if parts == ["capabilities"]:
        return "capabilities"
    if parts == ["runs"]:
        return "create"
    if len(parts) == 2:
        return "status"
    return {"trajectory": "trajectory", "files": "files", "cancel": "cancel"}.get(parts[2], "other")


async def _create_body(request: web.Request) -> tuple[Any, dict[str, str] | None, str | None]:
    """A `POST /runs` body: (the JSON body, path -> sha256 of each upload or None when it was not
    multipart, what is wrong with the uploads or None)."""
    if request.content_type != "multipart/form-data":
        return await _body(request), None, None
    body: Any = None
    parts: list[tuple[str, bytes]] = []
    reader = await request.multipart()
    async for part in reader:
        if not isinstance(part, BodyPartReader):
            return body, {}, "nested multipart is not expected"
        data = await part.read()
        if part.name == "input" and body is None:
            try:
                body = json.loads(data)
            except ValueError:
                return data.decode("utf-8", "replace"), {}, "the `input` part is not JSON"
        elif part.name == "file" and part.filename:
            parts.append((part.filename, bytes(data)))
        else:
            return body, {}, f"unexpected part {part.name!r} (filename {part.filename!r})"
    received = {name: hashlib.sha256(data).hexdigest() for name, data in parts}
    declared = body.get("uploads") if isinstance(body, dict) else None
    if not isinstance(declared, list) or len(declared) != len(parts):
        return body, received, f"{len(parts)} file parts but `uploads` is {declared!r:.200}"
    for entry, (name, data) in zip(declared, parts, strict=True):
        if not isinstance(entry, dict) or entry.get("path") != name:
            return body, received, f"file part {name!r} does not match `uploads` entry {entry!r:.200}"
        if entry.get("size") != len(data) or entry.get("sha256") != hashlib.sha256(data).hexdigest():
            return body, received, f"file part {name!r}: size or sha256 differs from its `uploads` entry"
    return body, received, None


async def _body(request: web.Request) -> Any:
    raw = await request.read()
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode("utf-8", "replace")


class HarnessServer(BackgroundServer[ReferenceHarness]):
    """`ReferenceHarness` in a background thread with its own event loop; a context manager."""

    def __init__(self, port: int = 0) -> None:
        super().__init__(ReferenceHarness(), port=port, name="reference-harness")

    @property
    def base_url(self) -> str:
        if self.port is None:
            raise RuntimeError("the harness is not running")
        return f"http://{HOST}:{self.port}"

    def configure(self, **settings: Any) -> None:
        self.call(self.app.configure, **settings)

    def stats(self) -> dict[str, Any]:
        return self.call(self.app.stats)

    def reset(self) -> None:
        self.call(self.app.reset)
