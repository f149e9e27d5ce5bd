"""A scripted model server on uvicorn (FastAPI), as vLLM and LiteLLM serve: OpenAI's
`POST /v1/chat/completions` and `POST /v1/responses`, and Anthropic's `POST /v1/messages`, each
request answered by the next
reply a test scripted — a whole body (`Reply`) or Server-Sent Events (`Stream`), cut short if
asked. Every body it sends is checked against the official SDKs' types when it is scripted, and
every request it receives when it arrives, so its payloads cannot drift from the real APIs:

    ScriptedServer     the server in a background thread on 127.0.0.1 (port 0); a context manager
    Reply / Stream     what one request is answered with
    check_request      a request body against the SDK's create-params (`openai.types.chat.
                       completion_create_params`, `openai.types.responses.response_create_params`,
                       `anthropic.types.message_create_params`)
    check_reply        a reply or error body against `ChatCompletion` / `Response` / `Message`
                       (`ErrorObject`, `ErrorResponse` for an error)
    check_event        one event's data against `ChatCompletionChunk` / `ResponseStreamEvent` /
                       `RawMessageStreamEvent`

The SDKs, FastAPI and uvicorn are test dependencies (the `dev` extra): only tests import this
module. `uvicorn[standard]` (httptools, uvloop), because plain uvicorn answers each kept-alive
request ~43 ms late (/work/shared/notes/real-world-measured.md).
"""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import TypeAdapter

from assay.testing._background import HOST
from assay.testing._uvicorn import UvicornThread

Api = Literal["openai", "responses", "anthropic"]
_PATHS: dict[str, Api] = {
    "/v1/chat/completions": "openai",
    "/v1/responses": "responses",
    "/v1/messages": "anthropic",
}


@cache
def _types() -> dict[str, Any]:
    """The SDKs' types, by what they check (imported on first use: they are slow to import)."""
    from anthropic.types import ErrorResponse, Message, RawMessageStreamEvent
    from anthropic.types.message_create_params import (
        MessageCreateParamsNonStreaming,
        MessageCreateParamsStreaming,
    )
    from openai.types.chat import ChatCompletion, ChatCompletionChunk
    from openai.types.chat.completion_create_params import (
        CompletionCreateParamsNonStreaming,
        CompletionCreateParamsStreaming,
    )
    from openai.types.responses import Response as ResponsesReply
    from openai.types.responses import ResponseStreamEvent
    from openai.types.responses.response_create_params import (
        ResponseCreateParamsNonStreaming,
        ResponseCreateParamsStreaming,
    )
    from openai.types.shared import ErrorObject

    return {
        ("openai", "request", False): CompletionCreateParamsNonStreaming,
        ("openai", "request", True): CompletionCreateParamsStreaming,
        ("responses", "request", False): ResponseCreateParamsNonStreaming,
        ("responses", "request", True): ResponseCreateParamsStreaming,
        ("anthropic", "request", False): MessageCreateParamsNonStreaming,
        ("anthropic", "request", True): MessageCreateParamsStreaming,
        ("openai", "reply"): TypeAdapter(ChatCompletion),
        ("openai", "error"): TypeAdapter(ErrorObject),
        ("openai", "event"): TypeAdapter(ChatCompletionChunk),
        ("responses", "reply"): TypeAdapter(ResponsesReply),
        ("responses", "error"): TypeAdapter(ErrorObject),
        ("responses", "event"): TypeAdapter(ResponseStreamEvent),
        ("anthropic", "reply"): TypeAdapter(Message),
        ("anthropic", "error"): TypeAdapter(ErrorResponse),
        ("anthropic", "event"): TypeAdapter(RawMessageStreamEvent),
    }


def check_request(api: Api, body: Any, extra_body: frozenset[str] = frozenset()) -> None:
    """Raise `ValueError` (`TypeError`: not an object) unless `body` is a request the SDK could have sent: its create-params
    TypedDict (streaming or not, by `stream`), every nested value validated, no key it lacks —
    but the `extra_body` keys, which the SDK sends as given (a server's own fields: vLLM's `top_k`)."""
    if not isinstance(body, dict):
        raise TypeError(f"the request body is not a JSON object: {body!r:.200}")
    body = {key: value for key, value in body.items() if key not in extra_body}
    params = _types()[(api, "request", body.get("stream") is True)]
    unknown = sorted(set(body) - set(params.__required_keys__) - set(params.__optional_keys__))
    if unknown:
        raise ValueError(f"{params.__name__} has no {', '.join(unknown)}")
    adapter = TypeAdapter(params)
    adapter.dump_python(adapter.validate_python(body), mode="json")  # dumping validates its iterables


def check_reply(api: Api, body: Any) -> None:
    """Raise `ValueError` unless `body` is a reply (`ChatCompletion`, `Response`, `Message`) or,
    when it holds an `error` (and is not a `response`, whose `error` says why it failed), an error
    body (OpenAI's `ErrorObject` under `error`, Anthropic's `ErrorResponse`)."""
    if isinstance(body, dict) and "error" in body and body.get("object") != "response":
        _types()[(api, "error")].validate_python(body["error"] if _ERROR_NESTED[api] else body)
    else:
        _types()[(api, "reply")].validate_python(body)


def check_event(api: Api, data: Any) -> None:
    """Raise `ValueError` unless `data` is one event the SDK reads: OpenAI's `[DONE]`, a
    `ChatCompletionChunk`, or an object with a non-empty `error` (the SDK raises on any, an
    object or a string); a Responses `ResponseStreamEvent` (its `error` event among them);
    Anthropic's `ping`, `error` (`ErrorResponse`) or a `RawMessageStreamEvent`."""
    _CHECK_EVENT[api](data)


def _types_check(api: Api, what: str) -> Callable[[Any], None]:
    """A check of data against one SDK type, looked up when first used."""

    def check(data: Any) -> None:
        _types()[(api, what)].validate_python(data)

    return check


def _check_chat_event(data: Any) -> None:
    if data == "[DONE]" or (isinstance(data, dict) and data.get("error")):
        if isinstance(data, dict) and isinstance(data["error"], dict):
            _types()[("openai", "error")].validate_python(data["error"])
        return
    _types()[("openai", "event")].validate_python(data)


def _check_messages_event(data: Any) -> None:
    if isinstance(data, dict) and data.get("type") == "ping":
        return
    if isinstance(data, dict) and data.get("type") == "error":
        _types()[("anthropic", "error")].validate_python(data)
    else:
        _types()[("anthropic", "event")].validate_python(data)


# How the two wire formats differ, by API (a table, not a test of which API it is).
_CHECK_EVENT: dict[str, Callable[[Any], None]] = {
    "openai": _check_chat_event,
    "responses": _types_check("responses", "event"),
    "anthropic": _check_messages_event,
}
# OpenAI's ErrorObject is under `error`.
_ERROR_NESTED: dict[str, bool] = {"openai": True, "responses": True, "anthropic": False}
# The Responses API's and Anthropic's SSE carry `event:` lines, chat completions' do not.
_NAMED_EVENTS: dict[str, bool] = {"openai": False, "responses": True, "anthropic": True}


@dataclass
class Reply:
    """A whole body, JSON (checked by `check_reply` when made).

    Args:
        api: whose body it is.
        body: the JSON value.
        status: the HTTP status.
        headers: headers besides `content-type`.
    """

    api: Api
    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_reply(self.api, self.body)


@dataclass
class Stream:
    """A 200 `text/event-stream` of events (each checked by `check_event` when made): OpenAI chat
    completions' as `data:` lines only, the Responses API's and Anthropic's named by their `type`
    (`event: response.created`, `event: message_start`).

    Args:
        api: whose events they are.
        events: each event's data (an object, or OpenAI's `"[DONE]"`).
        headers: headers besides `content-type`.
        cut: after the events, close the connection without ending the reply.
    """

    api: Api
    events: list[Any]
    headers: dict[str, str] = field(default_factory=dict)
    cut: bool = False

    def __post_init__(self) -> None:
        for data in self.events:
            check_event(self.api, data)

    def lines(self) -> list[bytes]:
        out = []
        for data in self.events:
            text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
            head = f"event: {data['type']}\n" if _NAMED_EVENTS[self.api] else ""
            out.append(f"{head}data: {text}\n\n".encode())
        return out


class ScriptedServer(UvicornThread):
    """The scripted server on uvicorn in a daemon thread (`UvicornThread`); a context manager.

    Attributes:
        requests: every request received, in order, as (path, JSON body).
        problems: what was wrong with requests the SDK's types refused (answered 400), or
            with a request that came when nothing was scripted (answered 500).
        extra_body: body keys let through unchecked, as the SDK's `extra_body` sends them (the
            fields of a server that speaks the API and more: vLLM's `top_k`, `guided_json`).
    """

    thread_name = "scripted-server"

    def __init__(self) -> None:
        self._script: dict[str | None, deque[Reply | Stream]] = {}
        self._lock = threading.Lock()
        self.requests: list[tuple[str, Any]] = []
        self.problems: list[str] = []
        self.extra_body: frozenset[str] = frozenset()

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>/v1`."""
        if self.port is None:
            raise RuntimeError("the scripted server is not running")
        return f"http://{HOST}:{self.port}/v1"

    def script(self, *replies: Reply | Stream, when: str | None = None) -> None:
        """Answer the next requests with these, in order (after any scripted before).

        Args:
            replies: the replies, one a request.
            when: only for requests whose body (as JSON text) holds this text (a prompt of
                one item, when items run in a seeded order); such replies come first.
        """
        with self._lock:
            self._script.setdefault(when, deque()).extend(replies)

    def reset(self) -> None:
        """Forget what was scripted, received and found wrong."""
        with self._lock:
            self._script.clear()
            self.requests.clear()
            self.problems.clear()
            self.extra_body = frozenset()

    def _next(self, path: str, body: Any) -> Reply | Stream | None:
        text = json.dumps(body)
        with self._lock:
            self.requests.append((path, body))
            for when, replies in self._script.items():
                if replies and when is not None and when in text:
                    return replies.popleft()
            fallback = self._script.get(None)
            return fallback.popleft() if fallback else None

    def app(self) -> FastAPI:
        app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)

        @app.post("/v1/chat/completions")
        @app.post("/v1/responses")
        @app.post("/v1/messages")
        async def answer(request: Request) -> Response:
            api = _PATHS[request.url.path]
            try:
                body = json.loads(await request.body())
            except ValueError:
                body = None
            reply = self._next(request.url.path, body)
            try:
                check_request(api, body, self.extra_body)
            except (TypeError, ValueError) as exc:
                self.problems.append(f"{request.url.path}: {exc}")
                return _error(api, 400, f"invalid request: {exc}")
            if reply is None:
                self.problems.append(f"{request.url.path}: a request came when nothing was scripted")
                return _error(api, 500, "nothing scripted")
            if isinstance(reply, Reply):
                return Response(
                    json.dumps(reply.body), reply.status, reply.headers, media_type="application/json"
                )
            return StreamingResponse(_events(reply), headers=reply.headers, media_type="text/event-stream")

        return app


async def _events(stream: Stream) -> AsyncIterator[bytes]:
    for line in stream.lines():
        yield line
    if stream.cut:  # an exception inside a streamed body makes uvicorn drop the connection mid-reply
        raise ConnectionAbortedError("the script cuts this stream here")


def _error(api: Api, status: int, message: str) -> Response:
    error: dict[str, Any] = {"message": message, "type": "invalid_request_error"}
    body: dict[str, Any] = (
        {"error": {**error, "param": None, "code": None}}
        if _ERROR_NESTED[api]
        else {"type": "error", "error": error}
    )
    return Response(json.dumps(body), status, media_type="application/json")
