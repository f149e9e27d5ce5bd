"""A mock OpenAI-compatible chat-completions server, for tests and benchmarks.

It listens on a real socket at 127.0.0.1 and is built on `aiohttp.web` with a deliberately lean
handler (stdlib `json`, no validation models, no access log) so that it sustains several thousand
requests per second on one core and never becomes the bottleneck of a benchmark.

Endpoints
---------
`POST /v1/chat/completions`
    Reads `model` and `messages` and answers in OpenAI's shape: `id`, `object: chat.completion`,
    `created`, `model`, `choices[0].message.content`, `finish_reason: stop` and
    `usage: {prompt_tokens, completion_tokens, total_tokens}`, with the header
    `x-request-id: req_<n>` (`n` counts every chat request the server ever received; it is not
    reset, so ids stay unique for the server's lifetime). `prompt_tokens` is the number of
    whitespace-separated words in all messages, `completion_tokens` the number in the answer.
    The answer is chosen in this order: `answers[<last user message>]` (exact match),
    `answers["*"]`, the last user message echoed back, or `""` when `echo` is false. Message
    content may be a string or a list of OpenAI content parts (the text parts are used).
    A body that is not a JSON object with a list of message objects gets a 400.

`POST /_mock/config`
    JSON with any of the keys below; each key given replaces that setting, keys not given are
    left alone. Answers the settings now in force. Unknown keys or bad values get a 400.

    - `latency_ms` (number, default 0): added to every chat reply with `asyncio.sleep`.
    - `answers` (object): last user message -> reply content; the key `"*"` is the default.
    - `echo` (bool, default true): echo the last user message when no answer matches.
    - `faults` (list): a queue of faults. Each request takes the first fault in the queue whose
      `match` (a substring of the last user message; absent = every request) it satisfies, and
      that fault's `times` (default 1, `-1` = forever) drops by one; a fault is removed once
      used up. A fault has a `status`, a `delay_ms`, or both:

      - `status`: reply with that HTTP status and an OpenAI-style error body
        `{"error": {"message", "type", "code"}}` (each overridable with the fault's keys of the
        same names), the `x-request-id` header, and `Retry-After` if `retry_after` is given:
        seconds (a number), or a text sent as it is (an HTTP-date).
      - `delay_ms`: a slow reply; sleep that long on top of `latency_ms`, then answer (normally,
        or with the fault's `status` if it has one).
      - `drop: true`: an answer broken mid-stream: status 200, a `Content-Length` promising more
        than is sent, part of a body, then the connection is closed.

    - `token_delay_ms` (number, default 0): between the words of a streamed reply.

    `batch_delay_ms` and `expire` configure the Batch API (`/v1/files`, `/v1/batches`:
    `assay.testing._openai_batches`).

    `"stream": true` answers with Server-Sent Events (`chat.completion.chunk`s, one per word,
    the usage last when `stream_options.include_usage`, then `[DONE]`; `assay.testing._sse`);
    a `drop` fault then cuts the stream after its first word.

    Example: `{"latency_ms": 20, "answers": {"What is 2+2?": "4"},
    "faults": [{"status": 429, "times": 2, "retry_after": 0.1, "match": "2+2"},
    {"status": 500}, {"delay_ms": 5000}]}`

`GET /_mock/stats`
    `{"requests": n, "by_status": {"200": n, ...}, "bodies": [last 50 request bodies],
    "last_authorization": <Authorization header of the last chat request or null>}`.
    A request is counted, under the status it is going to get, when it arrives.

`POST /_mock/reset`
    Zeroes the counters, clears the fault queue and restores the settings the server was
    started with.

Python API
----------
`MockOpenAIServer` runs the server in a background thread with its own event loop::

    with MockOpenAIServer(latency_ms=0) as srv:      # port=0 (default) picks a free port
        srv.base_url                                  # "http://127.0.0.1:<port>/v1"
        srv.configure(faults=[{"status": 429, "retry_after": 0.1}])
        srv.stats()
        srv.reset()

`configure`, `stats` and `reset` run on the server's loop, so they never race a request.
`MockOpenAI` is the same server for code that already runs inside an event loop
(`port = await mock.start()`, `await mock.stop()`).

CLI
---
`python -m assay.testing.mock_openai --port 8000 --latency-ms 20` serves in the foreground until
SIGINT or SIGTERM. Once listening it prints `listening on http://127.0.0.1:<port>/v1` and
flushes, so a parent process can wait for that line; `--port 0` picks a free port.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import signal
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from assay.testing._background import BackgroundServer, listen
from assay.testing._openai_batches import OpenAIBatches
from assay.testing._sse import chat_completion_stream

HOST = "127.0.0.1"
BODIES_KEPT = 50
_CONFIG_KEYS = frozenset({"latency_ms", "token_delay_ms", "answers", "echo", "faults"})
_FAULT_KEYS = frozenset(
    {"status", "times", "retry_after", "match", "delay_ms", "drop", "message", "type", "code"}
)
# (type, code) as OpenAI sends them, so that clients classifying errors see realistic bodies.
_ERROR_KINDS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None),
    503: ("server_error", None),
}


@dataclass(slots=True)
class Fault:
    """One entry of the fault queue; see the module docstring for the meaning of each field."""

    times: int = 1
    status: int | None = None
    delay_ms: float = 0.0
    drop: bool = False
    retry_after: float | str | None = None
    match: str | None = None
    message: str | None = None
    type: str | None = None
    code: str | None = None

    @classmethod
    def from_dict(cls, raw: Any) -> Fault:
        """Build a fault from its JSON form.

        Args:
            raw: A mapping with the keys `status`, `times`, `retry_after`, `match`, `delay_ms`,
                `message`, `type`, `code`.

        Returns:
            The fault.

        Raises:
            TypeError: if `raw` is not a mapping.
            ValueError: on an unknown key, a bad value, or a fault that has neither `status`
                nor `delay_ms`.
        """
        if not isinstance(raw, dict):
            raise TypeError(f"a fault must be an object, got {raw!r}")
        unknown = set(raw) - _FAULT_KEYS
        if unknown:
            raise ValueError(f"unknown fault keys {sorted(unknown)}; allowed: {sorted(_FAULT_KEYS)}")
        status = raw.get("status")
        if status is not None and not (_is_int(status) and 400 <= status <= 599):
            raise ValueError(f"fault status must be an HTTP error status (400-599), got {status!r}")
        times = raw.get("times", 1)
        if not _is_int(times) or not (times >= 1 or times == -1):
            raise ValueError(f"fault times must be a positive integer or -1, got {times!r}")
        delay_ms = raw.get("delay_ms", 0)
        if not _is_number(delay_ms) or delay_ms < 0:
            raise ValueError(f"fault delay_ms must be a number >= 0, got {delay_ms!r}")
        drop = raw.get("drop", False)
        if drop is not True and drop is not False:
            raise ValueError(f"fault drop must be true or false, got {drop!r}")
        if status is None and not delay_ms and not drop:
            raise ValueError(f"a fault needs a status, a delay_ms or drop: {raw!r}")
        retry_after = raw.get("retry_after")
        if (
            retry_after is not None
            and not isinstance(retry_after, str)
            and (not _is_number(retry_after) or retry_after < 0)
        ):
            raise ValueError(f"fault retry_after must be a number >= 0 or a text, got {retry_after!r}")
        for key in ("match", "message", "type", "code"):
            if raw.get(key) is not None and not isinstance(raw[key], str):
                raise ValueError(f"fault {key} must be a string, got {raw[key]!r}")
        return cls(
            times=times,
            status=status,
            delay_ms=float(delay_ms),
            drop=drop,
            retry_after=retry_after,
            match=raw.get("match"),
            message=raw.get("message"),
            type=raw.get("type"),
            code=raw.get("code"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The fault's JSON form, without the fields left at their defaults."""
        out: dict[str, Any] = {"times": self.times}
        for key in ("status", "retry_after", "match", "message", "type", "code"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.delay_ms:
            out["delay_ms"] = self.delay_ms
        if self.drop:
            out["drop"] = True
        return out


def _is_int(value: Any) -> bool:
    # bool is an int subclass; `true` is never a meaningful count or status.
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _text(content: Any) -> str:
    """The text of a message's `content`: a string, or a list of OpenAI content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def _json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(
        body=json.dumps(payload, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


def _error_response(
    status: int,
    message: str,
    request_id: str | None = None,
    *,
    kind: str | None = None,
    code: str | None = None,
    retry_after: float | str | None = None,
) -> web.Response:
    default_kind, default_code = _ERROR_KINDS.get(
        status, ("invalid_request_error" if status < 500 else "server_error", None)
    )
    headers: dict[str, str] = {}
    if request_id is not None:
        headers["x-request-id"] = request_id
    if retry_after is not None:
        headers["Retry-After"] = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
    error = {"message": message, "type": kind or default_kind, "code": code or default_code}
    return _json_response({"error": error}, status, headers)


class MockOpenAI:
    """The mock server, to be started and stopped from inside a running event loop.

    All state lives on that loop: the HTTP handlers and the methods below must be called from it
    (`MockOpenAIServer` takes care of that for callers in other threads).

    Args:
        latency_ms: Delay added to every chat reply.
        answers: Last user message -> reply content; `"*"` is the default answer.
        faults: The initial fault queue (dicts as described in the module docstring).
        echo: Echo the last user message when no answer matches; otherwise answer "".
    """

    def __init__(
        self,
        latency_ms: float = 0,
        answers: dict[str, str] | None = None,
        faults: list[dict[str, Any]] | None = None,
        echo: bool = True,
    ) -> None:
        self._initial: dict[str, Any] = {
            "latency_ms": latency_ms,
            "token_delay_ms": 0,
            "answers": dict(answers or {}),
            "faults": list(faults or []),
            "echo": echo,
        }
        self._latency_ms: float = 0.0
        self._token_delay_ms: float = 0.0
        self._answers: dict[str, str] = {}
        self._echo = True
        self._faults: list[Fault] = []
        self._next_id = 0
        self._requests = 0
        self._by_status: collections.Counter[int] = collections.Counter()
        self._bodies: collections.deque[Any] = collections.deque(maxlen=BODIES_KEPT)
        self._last_authorization: str | None = None
        self._runner: web.AppRunner | None = None
        self.batches = OpenAIBatches()  # the Batch API (`assay.testing._openai_batches`)
        self.configure(**self._initial)

    def configure(self, **settings: Any) -> dict[str, Any]:
        """Replace the settings given, leaving the others alone.

        Args:
            **settings: Any of `latency_ms`, `answers`, `echo`, `faults`.

        Returns:
            The settings now in force.

        Raises:
            TypeError, ValueError: on an unknown key or a bad value; nothing is changed then.
        """
        unknown = set(settings) - _CONFIG_KEYS - OpenAIBatches.SETTINGS
        if unknown:
            raise ValueError(f"unknown config keys {sorted(unknown)}; allowed: {sorted(_CONFIG_KEYS)}")
        self.batches.configure(settings)
        # Validate everything before changing anything, so a bad request leaves the mock as it was.
        latency_ms = settings.get("latency_ms", self._latency_ms)
        if not _is_number(latency_ms) or latency_ms < 0:
            raise ValueError(f"latency_ms must be a number >= 0, got {latency_ms!r}")
        token_delay_ms = settings.get("token_delay_ms", self._token_delay_ms)
        if not _is_number(token_delay_ms) or token_delay_ms < 0:
            raise ValueError(f"token_delay_ms must be a number >= 0, got {token_delay_ms!r}")
        answers = settings.get("answers", self._answers)
        if not isinstance(answers, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in answers.items()
        ):
            raise ValueError(f"answers must map strings to strings, got {answers!r}")
        echo = settings.get("echo", self._echo)
        if not isinstance(echo, bool):
            raise TypeError(f"echo must be true or false, got {echo!r}")
        if "faults" in settings:
            if not isinstance(settings["faults"], list):
                raise TypeError(f"faults must be a list, got {settings['faults']!r}")
            self._faults = [Fault.from_dict(raw) for raw in settings["faults"]]
        self._latency_ms = latency_ms
        self._token_delay_ms = token_delay_ms
        self._answers = dict(answers)
        self._echo = echo
        return self.settings()

    def settings(self) -> dict[str, Any]:
        """The settings in force, in the form `configure` accepts."""
        return {
            "latency_ms": self._latency_ms,
            "token_delay_ms": self._token_delay_ms,
            "answers": dict(self._answers),
            "echo": self._echo,
            "faults": [fault.to_dict() for fault in self._faults],
        }

    def stats(self) -> dict[str, Any]:
        """Counters since start or the last reset; see `GET /_mock/stats`."""
        return {
            "requests": self._requests,
            "by_status": {str(status): n for status, n in sorted(self._by_status.items())},
            "bodies": list(self._bodies),
            "last_authorization": self._last_authorization,
        }

    def reset(self) -> None:
        """Zero the counters, clear the fault queue and restore the settings given at construction."""
        self._requests = 0
        self._by_status.clear()
        self._bodies.clear()
        self._last_authorization = None
        self.batches.reset()
        self.configure(**self._initial)

    def app(self) -> web.Application:
        """An aiohttp application serving this mock's routes."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/_mock/config", self._http_configure)
        app.router.add_get("/_mock/stats", self._http_stats)
        app.router.add_post("/_mock/reset", self._http_reset)
        self.batches.add_routes(app)
        return app

    async def start(self, port: int = 0) -> int:
        """Start listening on 127.0.0.1.

        Args:
            port: The port to bind; 0 picks a free one.

        Returns:
            The port bound.
        """
        self._runner, bound = await listen(self.app(), HOST, port)
        return bound

    async def stop(self) -> None:
        """Stop listening and close open connections."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def _take_fault(self, last_user: str) -> Fault | None:
        for i, fault in enumerate(self._faults):
            if fault.match is None or fault.match in last_user:
                if fault.times > 0:
                    fault.times -= 1
                    if fault.times == 0:
                        del self._faults[i]
                return fault
        return None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self._next_id += 1
        request_id = f"req_{self._next_id}"
        self._requests += 1
        self._last_authorization = request.headers.get("Authorization")
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        messages = body.get("messages") if isinstance(body, dict) else None
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            self._bodies.append(body if body is not None else raw.decode("utf-8", "replace"))
            self._by_status[400] += 1
            return _error_response(400, "body must be a JSON object with a list of messages", request_id)
        self._bodies.append(body)

        last_user = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        fault = self._take_fault(last_user) if self._faults else None
        status = fault.status if fault is not None and fault.status is not None else 200
        self._by_status[status] += 1
        delay_ms = self._latency_ms + (fault.delay_ms if fault is not None else 0.0)
        if delay_ms:
            await asyncio.sleep(delay_ms / 1000)

        streamed = body.get("stream") is True
        if fault is not None and fault.drop and not streamed:
            broken = web.StreamResponse(
                status=200, headers={"content-type": "application/json", "content-length": "4096"}
            )
            await broken.prepare(request)
            await broken.write(b'{"id": "chatcmpl-broken", "choices": [{"index": 0, "message": {"con')
            assert request.transport is not None
            request.transport.close()
            return broken

        if fault is not None and fault.status is not None:
            return _error_response(
                status,
                fault.message or f"mock fault: HTTP {status}",
                request_id,
                kind=fault.type,
                code=fault.code,
                retry_after=fault.retry_after,
            )

        answer = self._answers.get(last_user)
        if answer is None:
            answer = self._answers.get("*", last_user if self._echo else "")
        prompt_tokens = sum(len(_text(m.get("content")).split()) for m in messages)
        completion_tokens = len(answer.split())
        payload = {
            "id": f"chatcmpl-{self._next_id}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "mock"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        if streamed:
            options = body.get("stream_options")
            return await chat_completion_stream(
                request,
                payload,
                headers={"x-request-id": request_id},
                token_delay_ms=self._token_delay_ms,
                include_usage=isinstance(options, dict) and options.get("include_usage") is True,
                dropped=fault is not None and fault.drop,
            )
        return _json_response(payload, headers={"x-request-id": request_id})

    async def _http_configure(self, request: web.Request) -> web.Response:
        try:
            settings = json.loads(await request.read())
            if not isinstance(settings, dict):
                raise TypeError("the config must be a JSON object")
            return _json_response(self.configure(**settings))
        except (TypeError, ValueError) as exc:
            return _error_response(400, str(exc))

    async def _http_stats(self, request: web.Request) -> web.Response:
        return _json_response(self.stats())

    async def _http_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return _json_response(self.stats())


class MockOpenAIServer(BackgroundServer[MockOpenAI]):
    """`MockOpenAI` run in a background thread with its own event loop; a context manager.

    Args:
        latency_ms: Delay added to every chat reply.
        answers: Last user message -> reply content; `"*"` is the default answer.
        faults: The initial fault queue (dicts as described in the module docstring).
        echo: Echo the last user message when no answer matches; otherwise answer "".
        port: The port to bind on 127.0.0.1; 0 picks a free one.
    """

    def __init__(
        self,
        latency_ms: float = 0,
        answers: dict[str, str] | None = None,
        faults: list[dict[str, Any]] | None = None,
        echo: bool = True,
        port: int = 0,
    ) -> None:
        mock = MockOpenAI(latency_ms=latency_ms, answers=answers, faults=faults, echo=echo)
        super().__init__(mock, port=port, name="mock-openai")

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>/v1`, the base URL an OpenAI client expects."""
        if self.port is None:
            raise RuntimeError("the mock server is not running")
        return f"http://{HOST}:{self.port}/v1"

    def configure(self, **settings: Any) -> dict[str, Any]:
        """Replace the settings given; see `MockOpenAI.configure`."""
        return self.call(self.app.configure, **settings)

    def stats(self) -> dict[str, Any]:
        """Counters since start or the last reset; see `MockOpenAI.stats`."""
        return self.call(self.app.stats)

    def reset(self) -> None:
        """Zero the counters, clear faults, restore the initial settings; see `MockOpenAI.reset`."""
        self.call(self.app.reset)

    def batch_stats(self) -> dict[str, Any]:
        """The Batch API's counters (`assay.testing._openai_batches`)."""
        return self.call(self.app.batches.stats)


async def _serve(port: int, latency_ms: float) -> None:
    mock = MockOpenAI(latency_ms=latency_ms)
    bound = await mock.start(port)
    print(f"listening on http://{HOST}:{bound}/v1", flush=True)
    stopped = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stopped.set)
    try:
        await stopped.wait()
    finally:
        await mock.stop()


def main(argv: list[str] | None = None) -> None:
    """Serve the mock in the foreground until SIGINT or SIGTERM.

    Args:
        argv: Command-line arguments; `sys.argv[1:]` when None.
    """
    parser = argparse.ArgumentParser(
        prog="python -m assay.testing.mock_openai",
        description="Mock OpenAI chat-completions server on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=8000, help="port to listen on; 0 picks a free one")
    parser.add_argument("--latency-ms", type=float, default=0.0, help="delay added to every chat reply")
    args = parser.parse_args(argv)
    asyncio.run(_serve(args.port, args.latency_ms))


if __name__ == "__main__":
    main()
