"""The providers' batch APIs, each a `BatchAPI` the `Batcher` (`assay.calls.batch`) speaks through.

Anthropic's Message Batches (`AnthropicBatches`: `POST {base_url}/messages/batches`, `GET …/{id}`,
the JSONL at its `results_url`) and OpenAI's Batch API (`OpenAIBatches`: the requests uploaded as
a JSONL file to `/files`, a batch of it created at `/batches`, its output and error files read
back; chat completions or Responses requests, `BATCH_APIS`). Both hand back results in one
shape: `{"type": "succeeded", "message": <the reply>}`, or `errored` (with `error: {type,
message}`), `expired` or `canceled`.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar

Request = Callable[..., Awaitable[Any]]
"""`request(method, url, body=None, form=None, parse=True)`: one HTTP request with retries; its
JSON reply (or its bytes, `parse=False`); raises `TargetFailure`."""


@dataclass(frozen=True, slots=True)
class Status:
    """A batch as its provider sees it: whether it has ended, its request counts, and where its
    results are (`locator`, the API's own)."""

    ended: bool
    counts: dict[str, int]
    locator: Any = None


class BatchAPI(ABC):
    """One provider's batch API. `name` names the provider in failures (`<name>:<host>`)."""

    name: ClassVar[str]

    @abstractmethod
    async def submit(self, request: Request, base: str, requests: list[tuple[str, dict[str, Any]]]) -> str:
        """Submit (custom id, request body) pairs as one batch; returns the batch's id."""

    @abstractmethod
    async def status(self, request: Request, base: str, batch_id: str) -> Status:
        """Where the batch is."""

    @abstractmethod
    async def results(
        self, request: Request, base: str, batch_id: str, status: Status
    ) -> dict[str, dict[str, Any]]:
        """An ended batch's results by custom id (see the module docstring for their shape)."""


def _jsonl(raw: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]


class AnthropicBatches(BatchAPI):
    name = "anthropic"

    async def submit(self, request: Request, base: str, requests: list[tuple[str, dict[str, Any]]]) -> str:
        body = {"requests": [{"custom_id": cid, "params": params} for cid, params in requests]}
        return (await request("POST", f"{base}/messages/batches", body=body))["id"]

    async def status(self, request: Request, base: str, batch_id: str) -> Status:
        state = await request("GET", f"{base}/messages/batches/{batch_id}")
        counts = {k: v for k, v in (state.get("request_counts") or {}).items() if k != "processing"}
        return Status(state.get("processing_status") == "ended", counts, state.get("results_url"))

    async def results(
        self, request: Request, base: str, batch_id: str, status: Status
    ) -> dict[str, dict[str, Any]]:
        url = status.locator or f"{base}/messages/batches/{batch_id}/results"
        rows = _jsonl(await request("GET", url, parse=False))
        out = {}
        for row in rows:
            result = row["result"]
            if result.get("type") == "errored":  # `{"type": "error", "error": {type, message}}`
                result = {"type": "errored", "error": (result.get("error") or {}).get("error") or {}}
            out[row["custom_id"]] = result
        return out


class OpenAIBatches(BatchAPI):
    """OpenAI's Batch API, its requests all sent to one endpoint (`url`: chat completions, or the
    Responses API's `/v1/responses`, as the SDK's `batch_create_params.endpoint` names them)."""

    name = "openai"
    _ENDED = frozenset({"completed", "failed", "expired", "cancelled"})

    def __init__(self, url: str = "/v1/chat/completions") -> None:
        self.url = url

    async def submit(self, request: Request, base: str, requests: list[tuple[str, dict[str, Any]]]) -> str:
        lines = "".join(
            json.dumps({"custom_id": cid, "method": "POST", "url": self.url, "body": body}) + "\n"
            for cid, body in requests
        )
        uploaded = await request("POST", f"{base}/files", form={"purpose": "batch", "file": lines.encode()})
        body = {"input_file_id": uploaded["id"], "endpoint": self.url, "completion_window": "24h"}
        return (await request("POST", f"{base}/batches", body=body))["id"]

    async def status(self, request: Request, base: str, batch_id: str) -> Status:
        state = await request("GET", f"{base}/batches/{batch_id}")
        counts = {k: v for k, v in (state.get("request_counts") or {}).items() if k != "total"}
        files = (state.get("output_file_id"), state.get("error_file_id"))
        return Status(state.get("status") in self._ENDED, counts, files)

    async def results(
        self, request: Request, base: str, batch_id: str, status: Status
    ) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for file_id in status.locator or ():
            if file_id is None:
                continue
            for row in _jsonl(await request("GET", f"{base}/files/{file_id}/content", parse=False)):
                response, error = row.get("response") or {}, row.get("error") or {}
                if error.get("code") == "batch_expired":
                    out[row["custom_id"]] = {"type": "expired"}
                elif error or response.get("status_code") != 200:
                    body_error = (response.get("body") or {}).get("error") or {}
                    kind = (
                        error.get("code") or body_error.get("type") or f"http_{response.get('status_code')}"
                    )
                    message = error.get("message") or body_error.get("message") or ""
                    out[row["custom_id"]] = {"type": "errored", "error": {"type": kind, "message": message}}
                else:
                    out[row["custom_id"]] = {"type": "succeeded", "message": response["body"]}
        return out


# The batch API of each chat API (`ChatAPI.name`, `ChatAPI.path`): OpenAI's takes a batch of
# chat completions or of Responses requests.
BATCH_APIS: dict[tuple[str, str], BatchAPI] = {
    ("anthropic", "/messages"): AnthropicBatches(),
    ("openai", "/chat/completions"): OpenAIBatches(),
    ("openai", "/responses"): OpenAIBatches("/v1/responses"),
}
