"""OpenAI's Batch API, as the mock OpenAI server (`assay.testing.mock_openai`) speaks it.

`POST /v1/files` (multipart: `purpose`, `file`) keeps a file; `POST /v1/batches`
(`input_file_id`, `endpoint`: `/v1/chat/completions` or `/v1/responses`, `completion_window`)
accepts a batch of the file's requests at once (each line's `url` the batch's endpoint)
(`batch_<n>`, `status: in_progress`); `GET /v1/batches/{id}` shows it, `completed` once
`batch_delay_ms` have passed since it was created, with an `output_file_id` (one line per request
answered: `{"custom_id", "response": {"status_code", "request_id", "body"}, "error": null}`) and
an `error_file_id` (requests that expired: their last user message holds the `expire` text,
`error.code: batch_expired`); `GET /v1/files/{id}/content` reads a file.

When a batch ends, its requests are answered by the server's own `POST /v1/chat/completions`,
over the socket, as a provider's batch workers call its model: answers, usage and faults are the
chat endpoint's (a fault's status becomes that request's `status_code`). `batch_upstream` (an
origin, `http://host:port`) answers them elsewhere instead: the mock serves no `/v1/responses`
itself, so a batch of Responses requests is answered by a server that does (the scripted one,
which checks each body against the SDK's `ResponseCreateParams` and each reply against its
`Response`).

`stats()` (`MockOpenAIServer.batch_stats()`) counts `batch_submissions` and, per custom id, how
often it was submitted (`batch_requests`).
"""

from __future__ import annotations

import collections
import json
import time
from dataclasses import dataclass
from typing import Any

import aiohttp
from aiohttp import web


@dataclass(slots=True)
class _Batch:
    id: str
    endpoint: str
    input_file_id: str
    lines: list[dict[str, Any]]
    created: float
    ends: float
    status: str = "in_progress"
    output_file_id: str | None = None
    error_file_id: str | None = None
    completed: int = 0
    failed: int = 0

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "batch",
            "endpoint": self.endpoint,
            "input_file_id": self.input_file_id,
            "completion_window": "24h",
            "status": self.status,
            "output_file_id": self.output_file_id,
            "error_file_id": self.error_file_id,
            "created_at": int(self.created),
            "request_counts": {"total": len(self.lines), "completed": self.completed, "failed": self.failed},
        }


def _last_user(body: dict[str, Any]) -> str:
    turns = body.get("messages") or body.get("input") or []
    if isinstance(turns, str):  # a Responses request's `input` may be the text alone
        return turns
    for message in reversed(turns):
        if (
            isinstance(message, dict)
            and message.get("role") == "user"
            and isinstance(message.get("content"), str)
        ):
            return message["content"]
    return ""


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=status)


class OpenAIBatches:
    """The Batch API's state and routes, beside the mock's chat endpoint."""

    SETTINGS = frozenset({"batch_delay_ms", "expire", "batch_upstream"})
    ENDPOINTS = ("/v1/chat/completions", "/v1/responses")

    def __init__(self) -> None:
        self.batch_delay_ms: float = 0.0
        self.expire: str | None = None
        self.batch_upstream: str | None = None
        self._files: dict[str, bytes] = {}
        self._batches: dict[str, _Batch] = {}
        self._submitted: collections.Counter[str] = collections.Counter()
        self._submissions = 0
        self._next = 0

    def configure(self, settings: dict[str, Any]) -> None:
        """Take `batch_delay_ms`, `expire` and `batch_upstream` from `settings` (others are the chat
        mock's)."""
        delay = settings.get("batch_delay_ms", self.batch_delay_ms)
        if not isinstance(delay, int | float) or isinstance(delay, bool) or delay < 0:
            raise ValueError(f"batch_delay_ms must be a number >= 0, got {delay!r}")
        expire = settings.get("expire", self.expire)
        if expire is not None and not isinstance(expire, str):
            raise TypeError(f"expire must be a text or null, got {expire!r}")
        upstream = settings.get("batch_upstream", self.batch_upstream)
        if upstream is not None and not (isinstance(upstream, str) and upstream.startswith("http://")):
            raise ValueError(f"batch_upstream must be an http:// origin or null, got {upstream!r}")
        self.batch_delay_ms, self.expire, self.batch_upstream = float(delay), expire, upstream

    def settings(self) -> dict[str, Any]:
        return {
            "batch_delay_ms": self.batch_delay_ms,
            "expire": self.expire,
            "batch_upstream": self.batch_upstream,
        }

    def stats(self) -> dict[str, Any]:
        return {"batch_submissions": self._submissions, "batch_requests": dict(self._submitted)}

    def reset(self) -> None:
        self.batch_delay_ms, self.expire, self.batch_upstream = 0.0, None, None
        self._files.clear()
        self._batches.clear()
        self._submitted.clear()
        self._submissions = 0

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/files", self._upload)
        app.router.add_get("/v1/files/{file_id}/content", self._content)
        app.router.add_post("/v1/batches", self._create)
        app.router.add_get("/v1/batches/{batch_id}", self._get)

    def _id(self, prefix: str) -> str:
        self._next += 1
        return f"{prefix}{self._next}"

    async def _upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if form.get("purpose") != "batch" or not isinstance(upload, web.FileField):
            return _error(400, "expected multipart purpose=batch and a file")
        content = upload.file.read()
        file_id = self._id("file-")
        self._files[file_id] = content
        return web.json_response(
            {
                "id": file_id,
                "object": "file",
                "bytes": len(content),
                "purpose": "batch",
                "filename": upload.filename,
            }
        )

    async def _content(self, request: web.Request) -> web.Response:
        content = self._files.get(request.match_info["file_id"])
        if content is None:
            return _error(404, "no such file")
        return web.Response(body=content, content_type="application/octet-stream")

    async def _create(self, request: web.Request) -> web.Response:
        body = await request.json()
        content = self._files.get(body.get("input_file_id", ""))
        endpoint = body.get("endpoint")
        if content is None or endpoint not in self.ENDPOINTS:
            return _error(400, f"input_file_id must name an uploaded file; endpoint one of {self.ENDPOINTS}")
        try:
            lines = [json.loads(line) for line in content.decode().splitlines() if line.strip()]
            ids = [line["custom_id"] for line in lines]
            if len(set(ids)) != len(ids) or any(line.get("url") != endpoint for line in lines):
                raise ValueError(f"custom ids must be unique and every url {endpoint}")
        except (ValueError, KeyError, TypeError) as exc:
            return _error(400, f"bad input file: {exc}")
        self._submissions += 1
        self._submitted.update(ids)
        now = time.time()
        batch = _Batch(
            self._id("batch_"),
            endpoint,
            body["input_file_id"],
            lines,
            now,
            time.monotonic() + self.batch_delay_ms / 1000,
        )
        self._batches[batch.id] = batch
        return web.json_response(batch.view())

    async def _get(self, request: web.Request) -> web.Response:
        batch = self._batches.get(request.match_info["batch_id"])
        if batch is None:
            return _error(404, "no such batch")
        if batch.status == "in_progress" and time.monotonic() >= batch.ends:
            await self._finish(batch, f"{request.scheme}://{request.host}")
        return web.json_response(batch.view())

    async def _finish(self, batch: _Batch, origin: str) -> None:
        """Answer every request through its endpoint (here, or at `batch_upstream`); write the output
        and error files."""
        batch.status = "finalizing"
        output, errors = [], []
        async with aiohttp.ClientSession() as session:
            for line in batch.lines:
                if self.expire and self.expire in _last_user(line["body"]):
                    error = {
                        "code": "batch_expired",
                        "message": "This request could not be executed before the completion window expired.",
                    }
                    errors.append(
                        {
                            "id": self._id("batch_req_"),
                            "custom_id": line["custom_id"],
                            "response": None,
                            "error": error,
                        }
                    )
                    continue
                url = f"{self.batch_upstream or origin}{batch.endpoint}"
                async with session.post(url, json=line["body"]) as reply:
                    answer = {
                        "status_code": reply.status,
                        "request_id": reply.headers.get("x-request-id"),
                        "body": await reply.json(),
                    }
                output.append(
                    {
                        "id": self._id("batch_req_"),
                        "custom_id": line["custom_id"],
                        "response": answer,
                        "error": None,
                    }
                )
        batch.completed = sum(1 for row in output if row["response"]["status_code"] == 200)
        batch.failed = len(batch.lines) - batch.completed
        for rows, attribute in ((output, "output_file_id"), (errors, "error_file_id")):
            if rows:
                file_id = self._id("file-")
                self._files[file_id] = "".join(json.dumps(row) + "\n" for row in rows).encode()
                setattr(batch, attribute, file_id)
        batch.status = "completed"
