"""The mock's fault queue and its error replies: what a misbehaving provider sends.

A fault (`Fault`) is one entry of the queue `configure(faults=[...])` sets; its fields are
described in `assay.testing.mock_openai`. Error bodies and types are OpenAI's, so that clients
classifying errors see realistic replies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from aiohttp import web

from assay.testing._background import json_response

_FAULT_KEYS = frozenset(
    {
        "status",
        "times",
        "retry_after",
        "match",
        "after",
        "delay_ms",
        "drop",
        "message",
        "type",
        "code",
        "headers",
    }
)
# (type, code) as OpenAI sends them.
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
    """One entry of the fault queue; see `assay.testing.mock_openai` for the meaning of each field."""

    times: int = 1
    status: int | None = None
    delay_ms: float = 0.0
    drop: bool = False
    retry_after: float | str | None = None
    match: str | None = None
    after: str | None = None
    message: str | None = None
    type: str | None = None
    code: str | None = None
    headers: dict[str, str | None] | None = None

    @classmethod
    def from_dict(cls, raw: Any) -> Fault:
        """Build a fault from its JSON form.

        Args:
            raw: A mapping with the keys `status`, `times`, `retry_after`, `match`, `after`,
                `delay_ms`, `message`, `type`, `code`, `headers`.

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
        if status is not None and not (is_int(status) and 400 <= status <= 599):
            raise ValueError(f"fault status must be an HTTP error status (400-599), got {status!r}")
        times = raw.get("times", 1)
        if not is_int(times) or not (times >= 1 or times == -1):
            raise ValueError(f"fault times must be a positive integer or -1, got {times!r}")
        delay_ms = raw.get("delay_ms", 0)
        if not is_number(delay_ms) or delay_ms < 0:
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
            and (not is_number(retry_after) or retry_after < 0)
        ):
            raise ValueError(f"fault retry_after must be a number >= 0 or a text, got {retry_after!r}")
        for key in ("match", "after", "message", "type", "code"):
            if raw.get(key) is not None and not isinstance(raw[key], str):
                raise ValueError(f"fault {key} must be a string, got {raw[key]!r}")
        headers = raw.get("headers")
        if headers is not None and (
            not isinstance(headers, dict)
            or not all(isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in headers.items())
        ):
            raise ValueError(f"fault headers must map names to strings or null, got {headers!r}")
        return cls(
            times=times,
            status=status,
            delay_ms=float(delay_ms),
            drop=drop,
            retry_after=retry_after,
            match=raw.get("match"),
            after=raw.get("after"),
            message=raw.get("message"),
            type=raw.get("type"),
            code=raw.get("code"),
            headers=headers,
        )

    def to_dict(self) -> dict[str, Any]:
        """The fault's JSON form, without the fields left at their defaults."""
        out: dict[str, Any] = {"times": self.times}
        for key in ("status", "retry_after", "match", "after", "message", "type", "code", "headers"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.delay_ms:
            out["delay_ms"] = self.delay_ms
        if self.drop:
            out["drop"] = True
        return out


def is_int(value: Any) -> bool:
    # bool is an int subclass; `true` is never a meaningful count or status.
    return isinstance(value, int) and not isinstance(value, bool)


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def error_response(
    status: int,
    message: str,
    request_id: str | None = None,
    *,
    kind: str | None = None,
    code: str | None = None,
    retry_after: float | str | None = None,
    extra: dict[str, str | None] | None = None,
) -> web.Response:
    """An OpenAI-style error reply; `extra` headers are added to it (or, when None, removed: a
    gateway's reply lacks some of the provider's)."""
    default_kind, default_code = _ERROR_KINDS.get(
        status, ("invalid_request_error" if status < 500 else "server_error", None)
    )
    headers: dict[str, str] = {}
    if request_id is not None:
        headers["x-request-id"] = request_id
    if retry_after is not None:
        headers["Retry-After"] = retry_after if isinstance(retry_after, str) else f"{retry_after:g}"
    for name, value in (extra or {}).items():
        headers = {k: v for k, v in headers.items() if k.lower() != name.lower()}
        if value is not None:
            headers[name] = value
    error = {"message": message, "type": kind or default_kind, "code": code or default_code}
    return json_response({"error": error}, status, headers)
