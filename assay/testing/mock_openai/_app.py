"""`MockOpenAI`: the mock's routes and state, on the loop that serves them (the protocol is
described in `assay.testing.mock_openai`)."""

from __future__ import annotations

import asyncio
import collections
import json
import time
from typing import Any

from aiohttp import web

from assay.testing._background import MockApp, json_response
from assay.testing._openai_batches import OpenAIBatches
from assay.testing._sse import chat_completion_stream
from assay.testing.mock_openai._faults import Fault, error_response, is_number
from assay.testing.rate_limit import RateLimits

BODIES_KEPT = 50
_CONFIG_KEYS = frozenset({"latency_ms", "token_delay_ms", "answers", "echo", "faults", "rate_limits"})


def _answer_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)


def _text(content: Any) -> str:
    """The text of a message's `content`: a string, or a list of OpenAI content parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


class MockOpenAI(MockApp):
    """The mock server, to be started and stopped from inside a running event loop.

    All state lives on that loop: the HTTP handlers and the methods below must be called from it
    (`MockOpenAIServer` takes care of that for callers in other threads).

    Args:
        latency_ms: Delay added to every chat reply.
        answers: Last user message -> reply content (or a list of them, given in turn); `"*"` is
            the default answer.
        faults: The initial fault queue (dicts as described in `assay.testing.mock_openai`).
        echo: Echo the last user message when no answer matches; otherwise answer "".
    """

    def __init__(
        self,
        latency_ms: float = 0,
        answers: dict[str, str | list[str]] | None = None,
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
        self._answers: dict[str, str | list[str]] = {}
        # How many times each listed answer's message has been answered: its next answer in turn.
        self._answers_given: collections.Counter[str] = collections.Counter()
        self._echo = True
        self._faults: list[Fault] = []
        self._limits: RateLimits | None = None
        self._next_id = 0
        self._requests = 0
        self._by_status: collections.Counter[int] = collections.Counter()
        self._in_flight = 0
        self._peak_in_flight = 0
        self._bodies: collections.deque[Any] = collections.deque(maxlen=BODIES_KEPT)
        self._last_authorization: str | None = None
        # The last user messages answered so far, for faults held `after` one of them.
        self._answered: collections.deque[str] = collections.deque(maxlen=BODIES_KEPT)
        self._answer_given: asyncio.Event | None = None
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
        token_delay_ms = settings.get("token_delay_ms", self._token_delay_ms)
        if not is_number(token_delay_ms) or token_delay_ms < 0:
            raise ValueError(f"token_delay_ms must be a number >= 0, got {token_delay_ms!r}")
        if not is_number(latency_ms) or latency_ms < 0:
            raise ValueError(f"latency_ms must be a number >= 0, got {latency_ms!r}")
        answers = settings.get("answers", self._answers)
        if not isinstance(answers, dict) or not all(
            isinstance(k, str) and (isinstance(v, str) or _answer_list(v)) for k, v in answers.items()
        ):
            raise ValueError(
                f"answers must map strings to strings (or to non-empty lists of strings), got {answers!r}"
            )
        echo = settings.get("echo", self._echo)
        if not isinstance(echo, bool):
            raise TypeError(f"echo must be true or false, got {echo!r}")
        if "faults" in settings:
            if not isinstance(settings["faults"], list):
                raise TypeError(f"faults must be a list, got {settings['faults']!r}")
            self._faults = [Fault.from_dict(raw) for raw in settings["faults"]]
        if "rate_limits" in settings:
            self._limits = RateLimits.parse(settings["rate_limits"])
        self._latency_ms = latency_ms
        self._token_delay_ms = token_delay_ms
        self._answers = dict(answers)
        if "answers" in settings:
            self._answers_given.clear()
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
            # Only when set: a mock without limits reads as it always did.
            **({"rate_limits": self._limits.to_dict()} if self._limits is not None else {}),
        }

    def stats(self) -> dict[str, Any]:
        """Counters since start or the last reset; see `GET /_mock/stats`."""
        return {
            "requests": self._requests,
            "by_status": {str(status): n for status, n in sorted(self._by_status.items())},
            "peak_in_flight": self._peak_in_flight,
            "bodies": list(self._bodies),
            "last_authorization": self._last_authorization,
        }

    def reset(self) -> None:
        """Zero the counters, clear the fault queue and restore the settings given at construction."""
        self._requests = 0
        self._by_status.clear()
        self._peak_in_flight = 0
        self._bodies.clear()
        self._last_authorization = None
        self._answered.clear()
        self.batches.reset()
        self.configure(**self._initial)

    def app(self) -> web.Application:
        """An aiohttp application serving this mock's routes."""
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self.add_control_routes(app)
        self.batches.add_routes(app)
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

    async def _held_until_answered(self, text: str) -> None:
        """Wait until a request whose last user message contains `text` has been answered."""
        while not any(text in answered for answered in self._answered):
            if self._answer_given is None:
                self._answer_given = asyncio.Event()
            await self._answer_given.wait()

    def _note_answered(self, last_user: str) -> None:
        self._answered.append(last_user)
        if self._answer_given is not None:
            self._answer_given.set()
            self._answer_given = None

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
            return error_response(400, "body must be a JSON object with a list of messages", request_id)
        self._bodies.append(body)

        if self._limits is not None:  # assay/testing/rate_limit.py
            prompt_tokens = sum(len(_text(m.get("content")).split()) for m in messages)
            wait, limit_headers = self._limits.admit(prompt_tokens)
            if wait is not None:
                self._by_status[429] += 1
                refused = error_response(
                    429,
                    "mock rate limit reached",
                    request_id,
                    kind="rate_limit_exceeded",
                    retry_after=round(wait, 3),
                )
                refused.headers.update(limit_headers)
                return refused
            try:
                reply = await self._answer(request, body, messages, request_id)
            finally:
                self._limits.release()
            reply.headers.update(limit_headers)
            return reply
        return await self._answer(request, body, messages, request_id)

    async def _answer(
        self, request: web.Request, body: Any, messages: list[dict[str, Any]], request_id: str
    ) -> web.StreamResponse:
        # The most requests being answered at once, whoever sent them (a fleet's calls together).
        self._in_flight += 1
        self._peak_in_flight = max(self._peak_in_flight, self._in_flight)
        try:
            return await self._reply(request, body, messages, request_id)
        finally:
            self._in_flight -= 1

    async def _reply(
        self, request: web.Request, body: Any, messages: list[dict[str, Any]], request_id: str
    ) -> web.StreamResponse:
        last_user = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        fault = self._take_fault(last_user) if self._faults else None
        status = fault.status if fault is not None and fault.status is not None else 200
        self._by_status[status] += 1
        if fault is not None and fault.after is not None:
            await self._held_until_answered(fault.after)
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
            return error_response(
                status,
                fault.message or f"mock fault: HTTP {status}",
                request_id,
                kind=fault.type,
                code=fault.code,
                retry_after=fault.retry_after,
                extra=fault.headers,
            )

        key = last_user if last_user in self._answers else "*"
        answer = self._answers.get(key, last_user if self._echo else "")
        if isinstance(answer, list):
            answer = answer[self._answers_given[key] % len(answer)]
            self._answers_given[key] += 1
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
        self._note_answered(last_user)
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
        return json_response(payload, headers={"x-request-id": request_id})

    def error(self, status: int, message: str) -> web.Response:
        return error_response(status, message)
