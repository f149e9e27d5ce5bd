"""A scripted model server for the real agent CLIs: what Codex and Claude Code talk to in tests.

FastAPI on uvicorn (`[standard]`, as vLLM serves), run from a background thread, bound to the
address a test gives (the gateway of a Docker network the test created, so that a container on
it reaches the server and nothing else). Two APIs, each streamed as its provider streams it:

    POST /v1/responses   OpenAI's Responses API (`stream: true`), what `codex exec` sends
    POST /v1/messages    Anthropic's Messages API (`?beta=true`), what `claude -p` sends

Every request is kept (`ScriptedModels.seen`): its method, path, whether it carried the right
key, its JSON body, and what was wrong with the body against the official SDK's request type
(`openai.types.responses.ResponseCreateParamsStreaming`, `anthropic.types.beta.
MessageCreateParamsStreaming`). Every event sent is first validated against the SDK's stream
event type (`ResponseStreamEvent`, `BetaRawMessageStreamEvent`), so the server cannot drift from
the real wire format. A request with a wrong key gets the provider's 401. (Codex 0.171 sends one
field its SDK type lacks, `client_metadata`: a request's `problems` name it.)

Each API answers from its own script, one `Reply` per request, in order: the model's text and
tool calls (`Call`: a tool of the request's own `tools`, by name; a name the request does not
offer is a 400 naming it, so a CLI that renamed its tools is noticed) and the usage to report.
Past the script's end a request gets a 500 saying so.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any, Self, get_args, get_type_hints

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, TypeAdapter, ValidationError

from assay.testing._background import Started

_START_TIMEOUT_S = 10.0


@dataclass(frozen=True, slots=True)
class Call:
    """A tool call the model makes.

    Args:
        name: the tool's name, as the request's `tools` offer it.
        arguments: its arguments (a function tool's JSON object); for a free-form (custom) tool
            of the Responses API, a string: its input.
    """

    name: str
    arguments: dict[str, Any] | str


@dataclass(frozen=True, slots=True)
class Reply:
    """One answer of the model: text, then tool calls, with the usage reported for it.

    Args:
        text: the assistant's text (None: none).
        calls: tool calls after the text.
        input_tokens: input tokens (Responses: all of them; Messages: the uncached ones).
        output_tokens: output tokens.
        cached_tokens: input tokens read from the prompt cache.
        cache_write_tokens: input tokens written to the prompt cache.
        reasoning_tokens: the part of the output that was reasoning (Responses only).
    """

    text: str | None = None
    calls: tuple[Call, ...] = ()
    input_tokens: int = 100
    output_tokens: int = 10
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    reasoning_tokens: int = 0


@dataclass
class Seen:
    """One request the server got.

    Args:
        method: the HTTP method.
        path: the path, with its query string.
        key_ok: whether it carried the expected key (`Authorization: Bearer` or `x-api-key`).
        body: its JSON body (None: none, or not JSON).
        problems: what was wrong with the body against the SDK's request type.
        upgrade: its `Upgrade` header (a WebSocket attempt says `websocket`).
    """

    method: str
    path: str
    key_ok: bool
    body: Any = None
    problems: list[str] = field(default_factory=list)
    upgrade: str | None = None


def _request_type(name: str) -> tuple[TypeAdapter[Any], frozenset[str]]:
    if name == "responses":
        from openai.types.responses.response_create_params import ResponseCreateParamsStreaming as kind
    else:
        from anthropic.types.beta.message_create_params import MessageCreateParamsStreaming as kind
    return TypeAdapter(kind), frozenset(get_type_hints(kind))


def _event_types(name: str) -> dict[str, type[BaseModel]]:
    """The SDK's stream event models by their `type`."""
    if name == "responses":
        from openai.types.responses import ResponseStreamEvent as union
    else:
        from anthropic.types.beta import BetaRawMessageStreamEvent as union
    members = get_args(get_args(union)[0])
    return {get_args(m.model_fields["type"].annotation)[0]: m for m in members}


class _Api:
    """One API's script, request check and event check."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.replies: list[Reply] = []
        self._requests, self._fields = _request_type(name)
        self._events = _event_types(name)

    def problems(self, body: Any) -> list[str]:
        if not isinstance(body, dict):
            return ["the body is not a JSON object"]
        found = [f"unknown field {key!r}" for key in body if key not in self._fields]
        try:
            self._requests.validate_python(body)
        except ValidationError as error:
            found += [f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors()[:10]]
        return found

    def event(self, kind: str, payload: dict[str, Any]) -> bytes:
        """One SSE event, validated against the SDK's stream event type first."""
        data = {"type": kind, **payload}
        self._events[kind].model_validate(data)
        return f"event: {kind}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()


def _tool_names(body: dict[str, Any]) -> dict[str, str]:
    """The request's tools: name → type (`function`, `custom`, …)."""
    tools = body.get("tools") if isinstance(body.get("tools"), list) else []
    return {t.get("name"): t.get("type", "function") for t in tools if isinstance(t, dict) and t.get("name")}


class ScriptedModels(Started):
    """The scripted server. `start()` serves it; `stop()` ends it; also a context manager.

    Args:
        host: the address to bind (a Docker network's gateway, or 127.0.0.1).
        key: the API key every request must carry.
    """

    def __init__(self, *, host: str, key: str) -> None:
        self.host = host
        self.key = key
        self.seen: list[Seen] = []
        self.responses = _Api("responses")
        self.messages = _Api("messages")
        self._lock = threading.Lock()
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    # -- control --------------------------------------------------------------------------------

    def script(self, *, responses: list[Reply] | None = None, messages: list[Reply] | None = None) -> None:
        """Replace the scripts (and forget the requests seen)."""
        with self._lock:
            self.responses.replies = list(responses or [])
            self.messages.replies = list(messages or [])
            self.seen = []

    def requests(self, path_prefix: str) -> list[Seen]:
        """The requests seen whose path starts with `path_prefix`."""
        with self._lock:
            return [s for s in self.seen if s.path.startswith(path_prefix)]

    @property
    def base_url(self) -> str:
        """`http://<host>:<port>` (no `/v1`: each CLI adds what it needs)."""
        if self.port is None:
            raise RuntimeError("the scripted server is not running")
        return f"http://{self.host}:{self.port}"

    def start(self) -> Self:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(self.app(), log_level="warning", ws="none", lifespan="off")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name="scripted-models", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the scripted server did not start on {self.host}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None
        self.port = None

    # -- the app --------------------------------------------------------------------------------

    def app(self) -> FastAPI:
        app = FastAPI(openapi_url=None, docs_url=None, redoc_url=None)
        app.add_api_route("/v1/responses", self._responses, methods=["POST"])
        app.add_api_route("/v1/messages", self._messages, methods=["POST"])
        app.add_api_route("/{path:path}", self._other, methods=["GET", "POST", "PUT", "DELETE", "HEAD"])
        return app

    async def _seen(self, request: Request, key_ok: bool, api: _Api | None) -> Seen:
        raw = await request.body()
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        seen = Seen(request.method, path, key_ok, body, upgrade=request.headers.get("upgrade"))
        if api is not None:
            seen.problems = api.problems(body)
        with self._lock:
            self.seen.append(seen)
        return seen

    def _next(self, api: _Api) -> Reply | None:
        with self._lock:
            return api.replies.pop(0) if api.replies else None

    async def _other(self, request: Request, path: str) -> Response:
        await self._seen(request, False, None)
        return JSONResponse({"error": {"message": f"no route {request.url.path}"}}, status_code=404)

    # -- OpenAI Responses -----------------------------------------------------------------------

    async def _responses(self, request: Request) -> Response:
        key_ok = request.headers.get("authorization") == f"Bearer {self.key}"
        seen = await self._seen(request, key_ok, self.responses)
        if not key_ok:
            error = {
                "message": "Incorrect API key provided.",
                "type": "invalid_request_error",
                "param": None,
                "code": "invalid_api_key",
            }
            return JSONResponse({"error": error}, status_code=401)
        body = seen.body if isinstance(seen.body, dict) else {}
        reply = self._next(self.responses)
        if reply is None:
            return JSONResponse({"error": {"message": "the script has no more replies"}}, status_code=500)
        tools = _tool_names(body)
        missing = [c.name for c in reply.calls if c.name not in tools]
        if missing:
            offered = ", ".join(sorted(tools))
            message = f"the script calls {missing}, which the request does not offer (it offers {offered})"
            return JSONResponse({"error": {"message": message}}, status_code=400)
        return StreamingResponse(self._response_events(body, reply, tools), media_type="text/event-stream")

    async def _response_events(
        self, body: dict[str, Any], reply: Reply, tools: dict[str, str]
    ) -> AsyncIterator[bytes]:
        api = self.responses
        response_id = f"resp_{uuid.uuid4().hex}"
        base = {
            "id": response_id,
            "object": "response",
            "created_at": int(time.time()),
            "model": body.get("model", "scripted"),
            "output": [],
            "parallel_tool_calls": bool(body.get("parallel_tool_calls", False)),
            "tool_choice": "auto",
            "tools": [],
            "status": "in_progress",
        }
        number = iter(range(1_000_000))
        yield api.event("response.created", {"response": base, "sequence_number": next(number)})
        items = list(_response_items(reply, tools))
        for index, item in enumerate(items):
            added = {**item, "status": "in_progress"} if item["type"] != "custom_tool_call" else item
            if item["type"] == "message":
                added = {**added, "content": []}
            yield api.event(
                "response.output_item.added",
                {"output_index": index, "item": added, "sequence_number": next(number)},
            )
            if item["type"] == "message":
                text = item["content"][0]["text"]
                yield api.event(
                    "response.output_text.delta",
                    {
                        "item_id": item["id"],
                        "output_index": index,
                        "content_index": 0,
                        "delta": text,
                        "logprobs": [],
                        "sequence_number": next(number),
                    },
                )
            yield api.event(
                "response.output_item.done",
                {"output_index": index, "item": item, "sequence_number": next(number)},
            )
            await asyncio.sleep(0)
        usage = {
            "input_tokens": reply.input_tokens,
            "input_tokens_details": {
                "cached_tokens": reply.cached_tokens,
                "cache_write_tokens": reply.cache_write_tokens,
            },
            "output_tokens": reply.output_tokens,
            "output_tokens_details": {"reasoning_tokens": reply.reasoning_tokens},
            "total_tokens": reply.input_tokens + reply.output_tokens,
        }
        done = {**base, "status": "completed", "output": items, "usage": usage}
        yield api.event("response.completed", {"response": done, "sequence_number": next(number)})

    # -- Anthropic Messages ---------------------------------------------------------------------

    async def _messages(self, request: Request) -> Response:
        key_ok = request.headers.get("x-api-key") == self.key
        seen = await self._seen(request, key_ok, self.messages)
        if not key_ok:
            error = {"type": "authentication_error", "message": "invalid x-api-key"}
            return JSONResponse({"type": "error", "error": error}, status_code=401)
        body = seen.body if isinstance(seen.body, dict) else {}
        reply = self._next(self.messages)
        if reply is None:
            error = {"type": "api_error", "message": "the script has no more replies"}
            return JSONResponse({"type": "error", "error": error}, status_code=500)
        tools = _tool_names(body)
        missing = [c.name for c in reply.calls if c.name not in tools]
        if missing:
            message = f"the script calls {missing}, which the request does not offer ({sorted(tools)})"
            error = {"type": "invalid_request_error", "message": message}
            return JSONResponse({"type": "error", "error": error}, status_code=400)
        return StreamingResponse(self._message_events(body, reply), media_type="text/event-stream")

    async def _message_events(self, body: dict[str, Any], reply: Reply) -> AsyncIterator[bytes]:
        api = self.messages
        usage = {
            "input_tokens": reply.input_tokens,
            "output_tokens": 1,
            "cache_creation_input_tokens": reply.cache_write_tokens,
            "cache_read_input_tokens": reply.cached_tokens,
        }
        message = {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": body.get("model", "scripted"),
            "stop_reason": None,
            "stop_sequence": None,
            "usage": usage,
        }
        yield api.event("message_start", {"message": message})
        index = 0
        if reply.text is not None:
            yield api.event(
                "content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}}
            )
            yield api.event(
                "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": reply.text}}
            )
            yield api.event("content_block_stop", {"index": index})
            index += 1
        for call in reply.calls:
            block = {
                "type": "tool_use",
                "id": f"toolu_{uuid.uuid4().hex[:24]}",
                "name": call.name,
                "input": {},
            }
            yield api.event("content_block_start", {"index": index, "content_block": block})
            delta = {"type": "input_json_delta", "partial_json": json.dumps(call.arguments)}
            yield api.event("content_block_delta", {"index": index, "delta": delta})
            yield api.event("content_block_stop", {"index": index})
            index += 1
        stop = "tool_use" if reply.calls else "end_turn"
        final_usage = {**usage, "output_tokens": reply.output_tokens}
        yield api.event(
            "message_delta", {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": final_usage}
        )
        yield api.event("message_stop", {})


def _response_items(reply: Reply, tools: dict[str, str]) -> Iterator[dict[str, Any]]:
    """The Responses API output items of one reply: a message, then the tool calls."""
    if reply.text is not None:
        yield {
            "id": f"msg_{uuid.uuid4().hex}",
            "type": "message",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": reply.text, "annotations": [], "logprobs": []}],
        }
    for call in reply.calls:
        call_id = f"call_{uuid.uuid4().hex[:24]}"
        if tools.get(call.name) == "custom":
            yield {
                "id": f"ctc_{uuid.uuid4().hex}",
                "type": "custom_tool_call",
                "call_id": call_id,
                "name": call.name,
                "input": call.arguments if isinstance(call.arguments, str) else json.dumps(call.arguments),
            }
        else:
            yield {
                "id": f"fc_{uuid.uuid4().hex}",
                "type": "function_call",
                "call_id": call_id,
                "name": call.name,
                "arguments": json.dumps(call.arguments),
                "status": "completed",
            }
