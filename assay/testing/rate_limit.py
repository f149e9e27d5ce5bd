"""The mock server's rate limits: requests and tokens per minute and requests in flight, enforced
with token buckets as a provider enforces an account's limits.

Set with `POST /_mock/config {"rate_limits": {"rpm": 3000, "tpm": 200000, "max_in_flight": 64}}`
(each key optional; `null` or `{}` lifts the limits). A bucket holds one second's worth of its
rate (`rpm / 60`, at least 1) and refills at that rate, so bursts are short, as providers' are. A request over a limit is answered
429 with `Retry-After` (seconds until the bucket holds a token again) and every reply carries
`x-ratelimit-limit-requests`, `x-ratelimit-remaining-requests`, `x-ratelimit-reset-requests`
(and the `-tokens` ones when `tpm` is set), as OpenAI sends them.

Two more keys shape a stricter provider (issue 25): `burst` — the requests the bucket holds above
its steady rate (default one second's worth; `10` lets only 10 through at once whatever the
rate) — and `headers: "refusals"` — the `x-ratelimit-*` headers only on 429s, none on a success
(default `"all"`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

_KEYS = frozenset({"rpm", "tpm", "max_in_flight", "burst", "headers"})
_HEADERS_ON = ("all", "refusals")


@dataclass
class _Bucket:
    """Tokens refilled at `per_minute / 60` a second, holding at most `capacity`."""

    per_minute: float
    capacity: float
    level: float = 0.0
    at: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        self.level = self.capacity

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.per_minute / 60)
        self.at = now

    def wait_for(self, amount: float) -> float:
        """Seconds until `amount` tokens are there (0 if they are)."""
        missing = amount - self.level
        return 0.0 if missing <= 0 else missing * 60 / self.per_minute


class RateLimits:
    """An account's limits, checked per request (all calls on the mock's event loop).

    Args:
        rpm: requests per minute, or None.
        tpm: tokens (prompt + completion, estimated from the prompt) per minute, or None.
        max_in_flight: requests being answered at once, or None.
        burst: the requests the bucket holds (default: one second's worth of `rpm`).
        headers: `all` (every reply carries the `x-ratelimit-*` headers) or `refusals` (only 429s).
    """

    def __init__(
        self,
        rpm: float | None = None,
        tpm: float | None = None,
        max_in_flight: int | None = None,
        burst: float | None = None,
        headers: str = "all",
    ):
        self.rpm, self.tpm, self.max_in_flight = rpm, tpm, max_in_flight
        self.burst, self.headers = burst, headers
        self._requests = _Bucket(rpm, burst or max(1.0, rpm / 60)) if rpm else None
        self._tokens = _Bucket(tpm, max(1.0, tpm / 60)) if tpm else None
        self.in_flight = 0

    @classmethod
    def parse(cls, raw: Any) -> RateLimits | None:
        """The `rate_limits` setting: a JSON object with any of `rpm`, `tpm`, `max_in_flight`."""
        if raw is None or raw == {}:
            return None
        if not isinstance(raw, dict) or set(raw) - _KEYS:
            raise ValueError(f"rate_limits must be an object with keys among {sorted(_KEYS)}, got {raw!r}")
        headers = raw.get("headers") or "all"
        if headers not in _HEADERS_ON:
            raise ValueError(f"rate_limits.headers must be one of {list(_HEADERS_ON)}, got {headers!r}")
        for key, value in raw.items():
            if (
                key != "headers"
                and value is not None
                and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0)
            ):
                raise ValueError(f"rate_limits.{key} must be a number > 0, got {value!r}")
        if raw.get("burst") is not None and not raw.get("rpm"):
            raise ValueError("rate_limits.burst needs rpm: it is the requests' bucket")
        return cls(raw.get("rpm"), raw.get("tpm"), raw.get("max_in_flight"), raw.get("burst"), headers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "rpm": self.rpm,
            "tpm": self.tpm,
            "max_in_flight": self.max_in_flight,
            "burst": self.burst,
            "headers": self.headers,
        }

    def admit(self, tokens: int) -> tuple[float | None, dict[str, str]]:
        """Take a request of `tokens` tokens: (None, headers) when admitted — then `release` it
        once answered — or (seconds to wait, headers) when over a limit."""
        now = time.monotonic()
        wait = 0.0
        for bucket, amount in ((self._requests, 1.0), (self._tokens, float(tokens))):
            if bucket is not None:
                bucket.refill(now)
                wait = max(wait, bucket.wait_for(min(amount, bucket.capacity)))
        busy = self.max_in_flight is not None and self.in_flight >= self.max_in_flight
        if wait > 0 or busy:
            return max(wait, 0.05 if busy else 0.0), self._headers()
        for bucket, amount in ((self._requests, 1.0), (self._tokens, float(tokens))):
            if bucket is not None:
                bucket.level -= min(amount, bucket.capacity)
        self.in_flight += 1
        return None, self._headers() if self.headers == "all" else {}

    def release(self) -> None:
        self.in_flight -= 1

    def _headers(self) -> dict[str, str]:
        headers = {}
        for name, bucket in (("requests", self._requests), ("tokens", self._tokens)):
            if bucket is not None:
                headers[f"x-ratelimit-limit-{name}"] = str(int(bucket.per_minute))
                headers[f"x-ratelimit-remaining-{name}"] = str(max(0, math.floor(bucket.level)))
                headers[f"x-ratelimit-reset-{name}"] = f"{bucket.wait_for(1.0):.3f}s"
        return headers
