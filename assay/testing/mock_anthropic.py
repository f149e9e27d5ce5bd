"""A mock of Anthropic's Messages API, for tests and benchmarks: a real socket on 127.0.0.1.

Endpoints
---------
`POST /v1/messages`
    Needs `model`, `max_tokens` (a whole number >= 1) and `messages` (a list of `{role, content}`,
    content a string or a list of `text` blocks); else a 400 in Anthropic's error shape
    `{"type": "error", "error": {"type": "invalid_request_error", "message"}}`. Answers a
    `message`: `id` (`msg_<n>`), `type`, `role`, `model`, `content: [{"type": "text", "text"}]`,
    `stop_reason` (`end_turn`, `max_tokens` or `stop_sequence`), `stop_sequence` and `usage`,
    with the header `request-id: req_<n>`. The answer is chosen as the OpenAI mock's is
    (`answers[<last user message>]`, `answers["*"]`, the message echoed). It is cut at the first
    of `stop_sequences` it holds, and after `max_tokens` words.

    Tokens are whitespace-separated words. A `system` given as blocks with `cache_control`
    simulates the prompt cache: the first request with that system text writes its words
    (`cache_creation_input_tokens`), later ones read them (`cache_read_input_tokens`); the other
    input words are `input_tokens` (Anthropic counts cache reads and writes apart from it).

    `"stream": true` answers with Server-Sent Events as Anthropic sends them: `message_start`,
    `content_block_start`, a `ping`, one `content_block_delta` per word, `content_block_stop`,
    `message_delta` (stop reason, cumulative `output_tokens`), `message_stop`. The first delta
    comes after `latency_ms`, each further one after `token_delay_ms`.

`POST /v1/messages/batches`, `GET /v1/messages/batches/{id}`, `GET …/{id}/results`
    The Message Batches API: `{"requests": [{"custom_id", "params"}]}` is accepted at once as a
    `message_batch` (`msgbatch_<n>`, `processing_status: in_progress`, `request_counts`,
    `results_url`); it ends `batch_delay_ms` after it was created, when each request is answered
    as `/v1/messages` would (a fault with a `status` makes it `errored`), except those whose last
    user message holds the `expire` text (`expired`). Results are JSONL, one
    `{"custom_id", "result": {"type": "succeeded", "message"} | {"type": "errored", "error"} |
    {"type": "expired"}}` per request. Stats count `batch_submissions` and, per custom id, how
    often it was submitted (`batch_requests`): a request submitted twice shows 2; `batch_polls`
    counts the looks at a batch, `batch_downloads` each batch's results read (by batch id).

`POST /_mock/config`, `GET /_mock/stats`, `POST /_mock/reset`
    As the OpenAI mock's (`assay.testing.mock_openai`), with `token_delay_ms` among the settings.
    A fault's `status` answers in Anthropic's error shape (529 is `overloaded_error`), with
    `request-id` and `retry-after`; `drop: true` cuts the reply mid-way (a stream after its
    first delta). Stats add `last_api_key` (the `x-api-key` header of the last request) and
    `last_version` (its `anthropic-version`).

Python API: `MockAnthropicServer` (a context manager; `base_url`, `configure`, `stats`, `reset`).
"""

from __future__ import annotations

import asyncio
import collections
import json
import time
from typing import Any

from aiohttp import web

from assay.testing._anthropic_batches import Batch
from assay.testing._background import MockApp, MockServer, json_response
from assay.testing._sse import cut, open_stream, send
from assay.testing.mock_openai import Fault

BODIES_KEPT = 50
_CONFIG_KEYS = frozenset(
    {"latency_ms", "token_delay_ms", "answers", "echo", "faults", "batch_delay_ms", "expire"}
)
_ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def _text(content: Any) -> str:
    """The text of a message's (or the system's) content: a string, or a list of text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            block["text"]
            for block in content
            if isinstance(block, dict) and isinstance(block.get("text"), str)
        )
    return ""


def _words(text: str) -> int:
    return len(text.split())


def _error(
    status: int, message: str, request_id: str | None = None, retry_after: float | str | None = None
) -> web.Response:
    headers: dict[str, str] = {}
    if request_id is not None:
        headers["request-id"] = request_id
    if retry_after is not None:
        headers["retry-after"] = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return json_response({"type": "error", "error": {"type": kind, "message": message}}, status, headers)


def _problem(body: Any) -> str | None:
    """Why a body is not a Messages request, as Anthropic words it; None when it is one."""
    if not isinstance(body, dict):
        return "body must be a JSON object"
    if not isinstance(body.get("model"), str):
        return "model: Field required"
    max_tokens = body.get("max_tokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
        return "max_tokens: Field required (a whole number >= 1)"
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        return "messages: Field required (a list of messages)"
    if any(m.get("role") not in ("user", "assistant") for m in messages):
        return "messages: roles must be `user` or `assistant` (the system prompt is `system`)"
    return None


class MockAnthropic(MockApp):
    """The mock, to be started and stopped inside a running event loop (see the module docstring).

    Args:
        latency_ms: delay before a reply (a stream's first delta).
        token_delay_ms: delay between a stream's deltas.
        answers: last user message -> reply; `"*"` is the default.
        faults: the initial fault queue (as `assay.testing.mock_openai.Fault`).
        echo: echo the last user message when no answer matches; otherwise answer "".
        batch_delay_ms: a message batch ends this long after it was created.
        expire: a batch's requests whose last user message holds this text expire.
    """

    def __init__(
        self,
        latency_ms: float = 0,
        token_delay_ms: float = 0,
        answers: dict[str, str] | None = None,
        faults: list[dict[str, Any]] | None = None,
        echo: bool = True,
        batch_delay_ms: float = 0,
        expire: str | None = None,
    ) -> None:
        self._initial: dict[str, Any] = {
            "latency_ms": latency_ms,
            "token_delay_ms": token_delay_ms,
            "answers": dict(answers or {}),
            "faults": list(faults or []),
            "echo": echo,
            "batch_delay_ms": batch_delay_ms,
            "expire": expire,
        }
        self._settings: dict[str, Any] = {}
        self._batches: dict[str, Batch] = {}
        self._batch_requests: collections.Counter[str] = collections.Counter()
        self._batch_submissions = 0
        self._batch_polls = 0
        self._batch_downloads: collections.Counter[str] = collections.Counter()
        self._faults: list[Fault] = []
        self._cached: set[str] = set()
        self._next_id = 0
        self._requests = 0
        self._by_status: collections.Counter[int] = collections.Counter()
        self._bodies: collections.deque[Any] = collections.deque(maxlen=BODIES_KEPT)
        self._last_headers: dict[str, str | None] = {}

        self.configure(**self._initial)

    def configure(self, **settings: Any) -> dict[str, Any]:
        """Replace the settings given (`latency_ms`, `token_delay_ms`, `answers`, `echo`,
        `faults`); returns the settings in force. Raises ValueError / TypeError on a bad one,
        changing nothing."""
        unknown = set(settings) - _CONFIG_KEYS
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}; allowed: {sorted(_CONFIG_KEYS)}")
        if settings.get("expire") is not None and not isinstance(settings["expire"], str):
            raise TypeError(f"expire must be a text or null, got {settings['expire']!r}")
        for key in ("latency_ms", "token_delay_ms", "batch_delay_ms"):
            value = settings.get(key, 0)
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{key} must be a number >= 0, got {value!r}")
        answers = settings.get("answers", {})
        if not isinstance(answers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in answers.items()
        ):
            raise ValueError(f"answers must map strings to strings, got {answers!r}")
        if not isinstance(settings.get("echo", True), bool):
            raise TypeError(f"echo must be true or false, got {settings['echo']!r}")
        faults = [Fault.from_dict(raw) for raw in settings["faults"]] if "faults" in settings else None
        self._settings.update({k: v for k, v in settings.items() if k != "faults"})
        if faults is not None:
            self._faults = faults
        return self.settings()

    def settings(self) -> dict[str, Any]:
        return {**self._settings, "faults": [fault.to_dict() for fault in self._faults]}

    def stats(self) -> dict[str, Any]:
        return {
            "requests": self._requests,
            "by_status": {str(status): n for status, n in sorted(self._by_status.items())},
            "bodies": list(self._bodies),
            "last_api_key": self._last_headers.get("x-api-key"),
            "last_version": self._last_headers.get("anthropic-version"),
            "batch_submissions": self._batch_submissions,
            "batch_requests": dict(self._batch_requests),
            "batch_polls": self._batch_polls,
            "batch_downloads": dict(self._batch_downloads),
        }

    def reset(self) -> None:
        """Zero the counters, forget the prompt cache, restore the initial settings."""
        self._requests = 0
        self._by_status.clear()
        self._bodies.clear()
        self._cached.clear()
        self._batches.clear()
        self._batch_requests.clear()
        self._batch_submissions = 0
        self._batch_polls = 0
        self._batch_downloads.clear()
        self._last_headers = {}
        self._settings = {}
        self.configure(**self._initial)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_post("/v1/messages", self._messages)
        app.router.add_post("/v1/messages/batches", self._create_batch)
        app.router.add_get("/v1/messages/batches/{batch_id}", self._get_batch)
        app.router.add_get("/v1/messages/batches/{batch_id}/results", self._batch_results)
        self.add_control_routes(app)
        return app

    def _take_fault(self, last_user: str) -> Fault | None:
        for i, fault in enumerate(self._faults):
            if fault.match is None or fault.match in last_user:
                if fault.times > 0:
                    fault.times -= 1
                    if fault.times == 0:
                        del self._faults[i]
                return fault
        return None

    def _usage(self, body: dict[str, Any]) -> dict[str, int]:
        """Input tokens split as Anthropic splits them: uncached, cache writes, cache reads."""
        system = body.get("system")
        messages = sum(_words(_text(m.get("content"))) for m in body["messages"])
        cacheable = isinstance(system, list) and any(
            isinstance(block, dict) and block.get("cache_control") for block in system
        )
        system_words = _words(_text(system))
        written = read = 0
        if cacheable:
            key = f"{body['model']}\x00{_text(system)}"
            if key in self._cached:
                read = system_words
            else:
                written = system_words
                self._cached.add(key)
            system_words = 0
        return {
            "input_tokens": messages + system_words,
            "cache_creation_input_tokens": written,
            "cache_read_input_tokens": read,
        }

    def _answer(self, body: dict[str, Any], last_user: str) -> tuple[list[str], str, str | None]:
        """The answer's words, its stop reason and the stop sequence met."""
        answers = self._settings["answers"]
        text = answers.get(last_user)
        if text is None:
            text = answers.get("*", last_user if self._settings["echo"] else "")
        stop_reason, stop_sequence = "end_turn", None
        for sequence in body.get("stop_sequences") or []:
            at = text.find(sequence)
            if at != -1:
                text, stop_reason, stop_sequence = text[:at], "stop_sequence", sequence
                break
        words = text.split()
        if len(words) > body["max_tokens"]:
            words, stop_reason, stop_sequence = words[: body["max_tokens"]], "max_tokens", None
        return words, stop_reason, stop_sequence

    async def _messages(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self._next_id += 1
        request_id = f"req_{self._next_id}"
        self._requests += 1
        self._last_headers = {name: request.headers.get(name) for name in ("x-api-key", "anthropic-version")}
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        self._bodies.append(body if body is not None else raw.decode("utf-8", "replace"))
        if (problem := _problem(body)) is not None:
            self._by_status[400] += 1
            return _error(400, problem, request_id)
        last_user = next(
            (_text(m.get("content")) for m in reversed(body["messages"]) if m.get("role") == "user"), ""
        )
        fault = self._take_fault(last_user) if self._faults else None
        status = fault.status if fault is not None and fault.status is not None else 200
        self._by_status[status] += 1
        delay_ms = self._settings["latency_ms"] + (fault.delay_ms if fault is not None else 0.0)
        streamed = body.get("stream") is True
        if delay_ms and not (streamed and status == 200):
            await asyncio.sleep(delay_ms / 1000)
        if fault is not None and fault.status is not None:
            return _error(
                status, fault.message or f"mock fault: HTTP {status}", request_id, fault.retry_after
            )
        message, words = self._message(body, last_user)
        dropped = fault is not None and fault.drop
        if streamed:
            return await self._stream(request, message, words, request_id, delay_ms, dropped=dropped)
        if dropped:
            return await _broken(request, b'{"id": "msg_broken", "type": "message", "content": [{"ty')
        return json_response(message, headers={"request-id": request_id})

    def _message(self, body: dict[str, Any], last_user: str) -> tuple[dict[str, Any], list[str]]:
        """The reply `message` to a valid request, and its words."""
        words, stop_reason, stop_sequence = self._answer(body, last_user)
        usage = {**self._usage(body), "output_tokens": len(words)}
        message = {
            "id": f"msg_{self._next_id}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": [{"type": "text", "text": " ".join(words)}],
            "stop_reason": stop_reason,
            "stop_sequence": stop_sequence,
            "usage": usage,
        }
        return message, words

    # -- the Message Batches API ---------------------------------------------------------------

    async def _create_batch(self, request: web.Request) -> web.Response:
        self._next_id += 1
        try:
            body = json.loads(await request.read())
            requests = body["requests"]
            if not isinstance(requests, list) or not requests:
                raise TypeError("requests must be a non-empty list")
            custom_ids = [r["custom_id"] for r in requests]
            if any(not isinstance(c, str) or not c for c in custom_ids) or len(set(custom_ids)) != len(
                custom_ids
            ):
                raise ValueError("custom_id must be a unique, non-empty string")
            for r in requests:
                if (problem := _problem(r["params"])) is not None:
                    raise ValueError(f"requests.{r['custom_id']}.params.{problem}")
        except (ValueError, TypeError, KeyError) as exc:
            self._by_status[400] += 1
            return _error(400, f"bad batch: {exc}", f"req_{self._next_id}")
        self._batch_submissions += 1
        self._batch_requests.update(custom_ids)
        batch = Batch(
            id=f"msgbatch_{self._next_id}",
            requests=requests,
            created=time.time(),
            ends=time.monotonic() + self._settings["batch_delay_ms"] / 1000,
            results_url=str(request.url.with_path(f"/v1/messages/batches/msgbatch_{self._next_id}/results")),
        )
        self._batches[batch.id] = batch
        self._by_status[200] += 1
        return json_response(batch.view(), headers={"request-id": f"req_{self._next_id}"})

    def _ended(self, batch: Batch) -> bool:
        """Whether the batch has ended, its results computed the first time it is seen so."""
        if batch.results is None and time.monotonic() >= batch.ends:
            batch.results = [self._batch_result(r) for r in batch.requests]
            batch.ended = time.time()
        return batch.results is not None

    def _batch_result(self, entry: dict[str, Any]) -> dict[str, Any]:
        params = entry["params"]
        last_user = next(
            (_text(m.get("content")) for m in reversed(params["messages"]) if m.get("role") == "user"), ""
        )
        expire = self._settings.get("expire")
        if expire and expire in last_user:
            return {"custom_id": entry["custom_id"], "result": {"type": "expired"}}
        fault = self._take_fault(last_user) if self._faults else None
        if fault is not None and fault.status is not None:
            kind = _ERROR_TYPES.get(fault.status, "api_error")
            error = {"type": "error", "error": {"type": kind, "message": fault.message or "mock fault"}}
            return {"custom_id": entry["custom_id"], "result": {"type": "errored", "error": error}}
        self._next_id += 1
        message, _ = self._message(params, last_user)
        return {"custom_id": entry["custom_id"], "result": {"type": "succeeded", "message": message}}

    async def _get_batch(self, request: web.Request) -> web.Response:
        batch = self._batches.get(request.match_info["batch_id"])
        if batch is None:
            return _error(404, "batch not found")
        self._batch_polls += 1
        self._ended(batch)
        return json_response(batch.view())

    async def _batch_results(self, request: web.Request) -> web.Response:
        batch = self._batches.get(request.match_info["batch_id"])
        if batch is None or not self._ended(batch):
            return _error(404 if batch is None else 400, "batch not found or not ended")
        assert batch.results is not None
        self._batch_downloads[batch.id] += 1
        lines = "".join(json.dumps(r, separators=(",", ":")) + "\n" for r in batch.results)
        return web.Response(body=lines.encode(), content_type="application/binary")

    async def _stream(
        self,
        request: web.Request,
        message: dict[str, Any],
        words: list[str],
        request_id: str,
        delay_ms: float,
        *,
        dropped: bool,
    ) -> web.StreamResponse:
        response = await open_stream(request, {"request-id": request_id})

        async def event(kind: str, data: dict[str, Any]) -> None:
            await send(response, {"type": kind, **data}, kind)

        start = {**message, "content": [], "stop_reason": None, "stop_sequence": None}
        start["usage"] = {**message["usage"], "output_tokens": 1}
        await event("message_start", {"message": start})
        await event("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}})
        await event("ping", {})
        for n, word in enumerate(words):
            pause = delay_ms if n == 0 else self._settings["token_delay_ms"]
            if pause:
                await asyncio.sleep(pause / 1000)
            await event(
                "content_block_delta",
                {"index": 0, "delta": {"type": "text_delta", "text": word if n == 0 else f" {word}"}},
            )
            if dropped:
                cut(request)
                return response
        await event("content_block_stop", {"index": 0})
        await event(
            "message_delta",
            {
                "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message["stop_sequence"]},
                "usage": {"output_tokens": message["usage"]["output_tokens"]},
            },
        )
        await event("message_stop", {})
        await response.write_eof()
        return response

    def error(self, status: int, message: str) -> web.Response:
        return _error(status, message)


async def _broken(request: web.Request, part: bytes) -> web.StreamResponse:
    """A reply broken mid-way: status 200, a `Content-Length` promising more than is sent."""
    broken = web.StreamResponse(
        status=200, headers={"content-type": "application/json", "content-length": "4096"}
    )
    await broken.prepare(request)
    await broken.write(part)
    cut(request)
    return broken


class MockAnthropicServer(MockServer[MockAnthropic]):
    """`MockAnthropic` in a background thread with its own event loop; a context manager.

    Args:
        port: the port to bind on 127.0.0.1; 0 picks a free one.
        **settings: `MockAnthropic`'s settings.
    """

    def __init__(self, port: int = 0, **settings: Any) -> None:
        super().__init__(MockAnthropic(**settings), port=port, name="mock-anthropic")
