"""A message batch as the mock Anthropic server (`assay.testing.mock_anthropic`) keeps it and the
Message Batches API shows it (`GET /v1/messages/batches/{id}`)."""

from __future__ import annotations

import collections
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(slots=True)
class Batch:
    """A message batch the mock accepted."""

    id: str
    requests: list[dict[str, Any]]
    created: float
    ends: float
    results_url: str
    results: list[dict[str, Any]] | None = None
    ended: float | None = None

    def view(self) -> dict[str, Any]:
        """The batch as the API shows it."""
        kinds = collections.Counter(r["result"]["type"] for r in self.results or [])
        return {
            "id": self.id,
            "type": "message_batch",
            "processing_status": "in_progress" if self.results is None else "ended",
            "request_counts": {
                "processing": len(self.requests) if self.results is None else 0,
                "succeeded": kinds["succeeded"],
                "errored": kinds["errored"],
                "canceled": kinds["canceled"],
                "expired": kinds["expired"],
            },
            "created_at": _iso(self.created),
            "ended_at": None if self.ended is None else _iso(self.ended),
            "expires_at": _iso(self.created + 86400),
            "cancel_initiated_at": None,
            "archived_at": None,
            "results_url": None if self.results is None else self.results_url,
        }


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")
