"""The request sidecar: every model call captured as records, redacted, within hard byte limits.

A call becomes records of one operation: `start` (the request), one `attempt` per HTTP attempt
(status, timing, the response or the error) and `end` (outcome, usage, cost, retries). Records
are kept with the item they belong to and committed with it (`requests/` Parquet dataset), so an
item and its operations land together or not at all; item and score rows list their operation ids.

Redaction is the runtime's, not the spec's: API keys the spec names, `Bearer …` tokens, `sk-…`
keys and the spec's own `redact:` patterns are replaced before a record exists; headers are never
recorded. Limits are hard: a record over `max_record_bytes` has its bodies cut (and says so) or is
dropped; once the run's records reach `max_run_bytes` (or uncommitted ones `max_queue_bytes`)
further records are dropped and the manifest says `truncated`, with the reason. A failure inside
capture makes it `unavailable` for the rest of the run; ids of records never stored are not listed.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from assay.calls.keys import key_of
from assay.calls.media import without_media
from assay.calls.request_codec import VERSION
from assay.outcomes import CaptureStatus, RequestOutcome, RequestPhase, SpendKind

MIB = 1024 * 1024
_REDACTED = "[REDACTED]"
_ALWAYS = (r"Bearer\s+[A-Za-z0-9._~+/=-]{8,}", r"\bsk-[A-Za-z0-9_-]{16,}")


class CaptureSettings(BaseModel):
    """`capture_requests: true`, or these limits.

    Args:
        max_record_bytes: one record's JSON at most (bodies are cut to fit).
        max_run_bytes: all of a run's records at most.
        max_queue_bytes: records held in memory before their items are committed, at most.
        media_bytes: keep the bytes of the images and documents a request sends inline; by
            default a record keeps only their sha256 and size (`sha256:… bytes:…`).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_record_bytes: int = Field(default=4 * MIB, ge=1024)
    max_run_bytes: int = Field(default=16 * MIB, ge=1024)
    max_queue_bytes: int = Field(default=16 * MIB, ge=1024)
    media_bytes: bool = False


class Redactor:
    """Replaces secrets and patterns in every string of a value.

    Args:
        secrets: literal values never to store (API keys read from the environment).
        patterns: regular expressions whose matches are never stored.
    """

    def __init__(self, secrets: list[str], patterns: list[str]) -> None:
        parts = [re.escape(s) for s in sorted(set(secrets), key=len, reverse=True) if s]
        parts += [*_ALWAYS, *patterns]
        self._pattern = re.compile("|".join(f"(?:{p})" for p in parts))

    def text(self, value: str) -> str:
        return self._pattern.sub(_REDACTED, value)

    def value(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(str(k)): self.value(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.value(v) for v in value]
        return value

    def paths(self, paths: Iterable[str]) -> dict[str, str]:
        """Relative file paths as they may be stored: a secret (or a match of a pattern) in a
        file's or a folder's name is replaced as in `text`. A path that holds none keeps its
        name; one that does gets the redacted name, or, when a kept file or folder already has
        it, that name with `~2`, `~3`… before its extension, so no file overwrites another.

        Args:
            paths: `/`-separated relative paths of files.

        Returns:
            every path → the name to store it under (the same for most).
        """
        every = set(paths)
        stored = {path: path for path in every if self.text(path) == path}
        files = set(stored)
        folders = {prefix for path in stored for prefix in _folders(path)}
        for path in sorted(every - files):
            parts = [part for part in self.text(path).split("/") if part not in ("", ".", "..")]
            parts = parts or [_REDACTED]
            name, number = "/".join(parts), 1
            while name in files or name in folders or any(f in files for f in _folders(name)):
                number += 1
                stem, dot, extension = parts[-1].rpartition(".")
                last = f"{stem}~{number}.{extension}" if dot and stem else f"{parts[-1]}~{number}"
                name = "/".join([*parts[:-1], last])
            stored[path] = name
            files.add(name)
            folders.update(_folders(name))
        return stored


def _folders(path: str) -> list[str]:
    """The folders a relative path lies in: `a/b/c` → `a`, `a/b`."""
    parts = path.split("/")
    return ["/".join(parts[:depth]) for depth in range(1, len(parts))]


class Scope:
    """The records of one item's generation, or of one scorer on one item."""

    def __init__(self, recorder: Recorder, item_id: str, trial: int, scorer: str | None) -> None:
        self.recorder = recorder
        self.item_id = item_id
        self.trial = trial
        self.scorer = scorer
        self.records: list[dict[str, Any]] = []
        self.operation_ids: list[str] = []

    def begin(self, kind: SpendKind, model: str | None, request: Any) -> Operation:
        operation = Operation(self, kind, model)
        operation.record(RequestPhase.START, request=request)
        return operation


class Operation:
    """One model call's records."""

    def __init__(self, scope: Scope, kind: SpendKind, model: str | None) -> None:
        self.scope = scope
        self.kind = kind
        self.model = model
        self.id = uuid.uuid4().hex
        self._listed = False

    def record(self, phase: RequestPhase, **fields: Any) -> None:
        stored = self.scope.recorder.admit(
            {
                "v": VERSION,
                "operation_id": self.id,
                "phase": phase.value,
                "item_id": self.scope.item_id,
                "trial": self.scope.trial,
                "scorer": self.scope.scorer,
                "kind": self.kind.value,
                "model": self.model,
                "started_at": datetime.now(UTC),
                **fields,
            }
        )
        if stored is not None:
            self.scope.records.append(stored)
            if not self._listed:
                self.scope.operation_ids.append(self.id)
                self._listed = True

    def attempt(
        self,
        number: int,
        *,
        status: int | None,
        wire_ms: float,
        response: Any = None,
        error: str | None = None,
    ) -> None:
        self.record(
            RequestPhase.ATTEMPT,
            attempt=number,
            http_status=status,
            wire_ms=wire_ms,
            response=response,
            error=error,
        )

    def end(self, outcome: RequestOutcome, **fields: Any) -> None:
        self.record(RequestPhase.END, outcome=outcome.value, **fields)


class CaptureManifest(TypedDict):
    """The request sidecar's manifest, as a run's record holds it (`runs.capture_*`)."""

    capture_status: str
    capture_reason: str | None
    capture_records: int
    capture_bytes: int
    capture_dropped: int


class Recorder:
    """A run's capture: redaction, limits and the manifest.

    Args:
        settings: the limits; None when capture is off.
        redactor: the run's redaction.
        stored_bytes: bytes of records an earlier execution of the run already committed.
        status: the manifest status an earlier execution left (`truncated` stays truncated).
    """

    def __init__(
        self,
        settings: CaptureSettings | None,
        redactor: Redactor,
        *,
        stored_bytes: int = 0,
        status: str | None = None,
    ) -> None:
        self.settings = settings
        self.redactor = redactor
        self.bytes = stored_bytes
        self.queued = 0
        self.records = 0
        self.dropped = 0
        self.cut = 0
        if settings is None:
            self.status = CaptureStatus.OFF
        elif status in (CaptureStatus.TRUNCATED, CaptureStatus.UNAVAILABLE):
            self.status = CaptureStatus(status)
        else:
            self.status = CaptureStatus.COMPLETE
        self.reason: str | None = None

    @property
    def enabled(self) -> bool:
        return self.settings is not None and self.status is not CaptureStatus.UNAVAILABLE

    def scope(self, item_id: str, trial: int, scorer: str | None = None) -> Scope | None:
        return Scope(self, item_id, trial, scorer) if self.enabled else None

    def _truncate(self, why: str) -> None:
        if self.status is CaptureStatus.COMPLETE:
            self.status = CaptureStatus.TRUNCATED
            self.reason = why

    def admit(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The record redacted and within limits, or None when it is dropped."""
        if not self.enabled:
            return None
        assert self.settings is not None
        try:
            if not self.settings.media_bytes and record.get("request") is not None:
                record["request"] = without_media(record["request"])
            for body in ("request", "response", "error"):
                if record.get(body) is not None:
                    record[body] = self.redactor.value(record[body])
            size = _size(record)
            if size > self.settings.max_record_bytes:
                record, size = self._cut(record)
                if size > self.settings.max_record_bytes:
                    self.dropped += 1
                    self._truncate(
                        f"a record over max_record_bytes ({self.settings.max_record_bytes}) was dropped"
                    )
                    return None
            if self.bytes + size > self.settings.max_run_bytes:
                self.dropped += 1
                self._truncate(f"the run's records reached max_run_bytes ({self.settings.max_run_bytes})")
                return None
            if self.queued + size > self.settings.max_queue_bytes:
                self.dropped += 1
                self._truncate(
                    f"uncommitted records reached max_queue_bytes ({self.settings.max_queue_bytes})"
                )
                return None
        except Exception as exc:  # noqa: BLE001 - capture must never break a run; it says it failed
            self.status, self.reason = (
                CaptureStatus.UNAVAILABLE,
                f"capture failed: {type(exc).__name__}: {exc}",
            )
            return None
        record["bytes"] = size
        self.bytes += size
        self.queued += size
        self.records += 1
        return record

    def _cut(self, record: dict[str, Any]) -> tuple[dict[str, Any], int]:
        assert self.settings is not None
        self.cut += 1
        budget = self.settings.max_record_bytes // 2
        for body in ("request", "response"):
            if record.get(body) is not None:
                text = json.dumps(record[body], ensure_ascii=False)
                if len(text.encode()) > budget:
                    record[body] = {"truncated": text[: budget // 4], "original_bytes": len(text.encode())}
        record["truncated"] = True
        return record, _size(record)

    def committed(self, size: int) -> None:
        self.queued = max(0, self.queued - size)

    def manifest(self) -> CaptureManifest:
        return {
            "capture_status": self.status.value,
            "capture_reason": self.reason,
            "capture_records": self.records,
            "capture_bytes": self.bytes,
            "capture_dropped": self.dropped,
        }


def _size(record: dict[str, Any]) -> int:
    return len(json.dumps(record, ensure_ascii=False, default=str).encode())


def secrets_of(spec: Any) -> list[str]:
    """The values of every API key a spec names, from its variables and Secret blocks (read now,
    never stored)."""
    return [key for part in [spec.target, *spec.scorers] if (key := key_of(part))]


def stored_records(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Stored request rows as records of the JSONL codec (bodies parsed, times as ISO text)."""
    out = []
    for row in rows:
        record = {k: v for k, v in row.items() if k != "run_id" and v is not None}
        for body in ("request", "response"):
            if record.get(body) is not None:
                record[body] = json.loads(record[body])
        if record.get("started_at") is not None:
            record["started_at"] = record["started_at"].isoformat()
        out.append(record)
    return out


def carry_forward(
    source: list[dict[str, Any]], settings: CaptureSettings
) -> tuple[list[dict[str, Any]], str | None]:
    """A rescore's copy of its source's records: whole operations, in order, up to 75 % of the
    rescore's own run byte bound (the rest of the bound is for its judge calls)."""
    limit = settings.max_run_bytes * 3 // 4
    kept: list[dict[str, Any]] = []
    used = 0
    by_operation: dict[str, list[dict[str, Any]]] = {}
    for record in source:
        by_operation.setdefault(record["operation_id"], []).append(record)
    for records in by_operation.values():
        size = sum(r["bytes"] or 0 for r in records)
        if used + size > limit:
            return kept, f"the source's records were cut at 75% of max_run_bytes ({limit} bytes)"
        kept += records
        used += size
    return kept, None
