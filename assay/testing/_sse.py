"""Server-Sent Events as the mock servers stream them: an event stream opened, events written,
and a stream cut mid-way (the connection closed before the final event)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web


async def open_stream(request: web.Request, headers: dict[str, str]) -> web.StreamResponse:
    """A 200 `text/event-stream` reply, its headers sent."""
    response = web.StreamResponse(status=200, headers={"content-type": "text/event-stream", **headers})
    await response.prepare(request)
    return response


async def send(response: web.StreamResponse, data: Any, event: str | None = None) -> None:
    """One event: `event: <event>` (when named) and `data: <data as JSON, or the text>`."""
    text = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    await response.write(f"{head}data: {text}\n\n".encode())


def cut(request: web.Request) -> None:
    """Close the connection under a reply in progress: the client sees it end early."""
    assert request.transport is not None
    request.transport.close()


async def chat_completion_stream(
    request: web.Request,
    payload: dict[str, Any],
    *,
    headers: dict[str, str],
    token_delay_ms: float,
    include_usage: bool,
    dropped: bool,
) -> web.StreamResponse:
    """An OpenAI chat completion (`payload`, as unstreamed) streamed as `chat.completion.chunk`s:
    the role, one chunk per word of the content (`token_delay_ms` apart), the finish reason, the
    usage when `include_usage`, then `[DONE]`. `dropped`: the connection is closed after the
    first word."""
    response = await open_stream(request, headers)
    head = {key: payload[key] for key in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    await send(response, chunk({"role": "assistant", "content": ""}))
    words = payload["choices"][0]["message"]["content"].split()
    for n, word in enumerate(words):
        if n and token_delay_ms:
            await asyncio.sleep(token_delay_ms / 1000)
        await send(response, chunk({"content": word if n == 0 else f" {word}"}))
        if dropped:
            cut(request)
            return response
    await send(response, chunk({}, payload["choices"][0]["finish_reason"]))
    if include_usage:
        await send(response, {**head, "choices": [], "usage": payload["usage"]})
    await send(response, "[DONE]")
    await response.write_eof()
    return response
