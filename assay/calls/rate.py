"""Adaptive rate control: one AIMD controller per (endpoint, model), `concurrency` its ceiling.

Every HTTP attempt to the endpoint takes a slot of its controller (`ChatClient(gate=…)`): a retry
waits for a slot like a first attempt, so retries after a 429 are paced too. The run's items stay
within its own `concurrency` as before. Every attempt's status and headers come back through
`Endpoint.on_response` (`assay.calls.http`). The controller keeps a window — how many calls may be
in flight — and moves it as TCP moves its congestion window:

- **slow start**: the window starts small (`START_WINDOW`) and grows by one per success (doubling
  every round trip) until the first rate-limit answer or the ceiling;
- **multiplicative decrease**: a 429 or 529 halves the window — once per window: refusals of calls
  that were already in flight at the last decrease count once — and no call is sent until the
  server's `Retry-After` (or its `x-ratelimit-reset-requests`) has passed;
- **additive increase**: after that, each success adds 1 / window (one slot per round trip);
- **the server's own count**: while `x-ratelimit-remaining-requests` is no more than the calls in
  flight, the window holds instead of growing; a reply saying it is 0 pauses new calls until
  `x-ratelimit-reset-requests` (at most 1 s), before any 429;
- `rate_limits: {rpm}` (optional, per target) paces calls to at most that many a minute.

One controller serves every run of the process that calls the same endpoint and model (a matrix's
cells, runs started from one flow): they share the window, so together they stay under the
account's limit. Separate processes each run their own controller; the servers' `x-ratelimit-*`
headers and `Retry-After` are what they share (docs/rate-control.md). The controller's history —
(seconds since it started, window, in flight, 429s so far) — is stored with each run.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

from assay.calls.http import RATE_LIMIT_STATUSES, retry_after

START_WINDOW = 4
DECREASE = 0.5
INCREASE = 0.5  # slots per window of successes once past slow start
_HISTORY_EVERY_S = 0.5
_MAX_RESET_PAUSE_S = 1.0
_MAX_HISTORY = 2_000
_DURATION = re.compile(
    r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?"
)


def reset_seconds(value: str | None) -> float | None:
    """OpenAI's `x-ratelimit-reset-*` durations (`"1s"`, `"6m0s"`, `"20ms"`, `"0.5s"`) or plain
    seconds, as seconds; None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    match = _DURATION.fullmatch(value.strip())
    if not match or not any(match.groups()):
        return None
    hours, minutes, seconds, millis = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds + millis / 1000


def _count(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Sample:
    """One point of a controller's history."""

    t: float
    limit: float
    in_flight: int
    rate_limited: int

    def as_list(self) -> list[float | int]:
        return [round(self.t, 3), round(self.limit, 2), self.in_flight, self.rate_limited]


class RateController:
    """The window of calls in flight to one endpoint and model (see the module docstring).

    Use `async with controller:` around a call; pass `controller.observe` as the client's
    `on_response`.

    Args:
        name: what the controller controls (`<base_url> <model>`), for people.
        ceiling: the most calls in flight (the spec's `concurrency`).
        rpm: at most this many calls a minute, if set.
    """

    def __init__(self, name: str, ceiling: int, *, rpm: float | None = None) -> None:
        self.name = name
        self.ceiling = ceiling
        self.rpm = rpm
        self.limit = float(min(ceiling, START_WINDOW))
        self.threshold = float(ceiling)  # slow start ends here (halved on a rate limit)
        self.in_flight = 0
        self.rate_limited = 0
        self.responses = 0
        self._paused_until = 0.0
        self._outstanding = 0  # calls in flight at the last decrease
        self._since_decrease = 0  # answers since then
        self._next_send = 0.0
        self._freed: asyncio.Event | None = None
        self._started = time.monotonic()
        self._sampled = 0.0
        self.history: list[Sample] = []
        self._sample(force=True)

    # -- admission ------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        while True:
            wait = self._try_take()
            if wait is None:
                return self
            if wait > 0:
                await asyncio.sleep(wait)
            else:  # the window is full: wait for a call to end
                if self._freed is None:
                    self._freed = asyncio.Event()
                freed = self._freed
                await freed.wait()

    async def __aexit__(self, *exc: object) -> None:
        self.in_flight -= 1
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    def _try_take(self) -> float | None:
        """Take a slot (None), or say how long to wait: seconds, or 0 for "until a call ends"."""
        now = time.monotonic()
        if now < self._paused_until:
            return self._paused_until - now
        if self.in_flight >= int(self.limit):
            return 0.0
        if self.rpm:
            if now < self._next_send:
                return self._next_send - now
            self._next_send = max(now, self._next_send) + 60.0 / self.rpm
        self.in_flight += 1
        return None

    # -- feedback -------------------------------------------------------------------------------

    def observe(self, status: int | None, headers: Mapping[str, str]) -> None:
        """One attempt's answer (`assay.calls.http.ResponseHook`)."""
        self.responses += 1
        self._since_decrease += 1
        now = time.monotonic()
        if status in RATE_LIMIT_STATUSES:
            self.rate_limited += 1
            wait = retry_after(headers.get("retry-after"))
            if wait is None:
                wait = reset_seconds(headers.get("x-ratelimit-reset-requests")) or 1.0
            self._paused_until = max(self._paused_until, now + wait)
            # One decrease per window: refusals of calls sent before the last decrease (still in
            # flight then) say nothing new about the smaller window.
            if self._since_decrease >= self._outstanding:
                self.threshold = max(1.0, self.limit * DECREASE)
                self.limit = self.threshold
                self._outstanding, self._since_decrease = self.in_flight, 0
            self._sample(force=True)
            return
        if status is not None and status < 400:
            remaining = _count(headers.get("x-ratelimit-remaining-requests"))
            if remaining == 0:
                reset = reset_seconds(headers.get("x-ratelimit-reset-requests"))
                if reset:
                    self._paused_until = max(self._paused_until, now + min(reset, _MAX_RESET_PAUSE_S))
            if remaining is not None and remaining <= self.in_flight:
                pass  # the account is nearly used up: hold the window rather than grow into a 429
            elif self.limit < self.threshold:
                self.limit = min(self.limit + 1, self.ceiling)
            else:
                self.limit = min(self.limit + INCREASE / self.limit, self.ceiling)
        self._sample()

    def _sample(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._sampled < _HISTORY_EVERY_S:
            return
        self._sampled = now
        if len(self.history) >= _MAX_HISTORY:
            del self.history[: _MAX_HISTORY // 2 : 2]  # thin the oldest half, keep the shape
        self.history.append(Sample(now - self._started, self.limit, self.in_flight, self.rate_limited))

    def summary(self) -> dict[str, Any]:
        """What is stored with a run: the settings, the totals and the history."""
        self._sample(force=True)
        return {
            "endpoint": self.name,
            "ceiling": self.ceiling,
            "rpm": self.rpm,
            "limit": round(self.limit, 2),
            "responses": self.responses,
            "rate_limited": self.rate_limited,
            "history": {
                "columns": ["t", "limit", "in_flight", "rate_limited"],
                "rows": [s.as_list() for s in self.history],
            },
        }


_controllers: dict[str, RateController] = {}


def controller_for(base_url: str, model: str, ceiling: int, *, rpm: float | None = None) -> RateController:
    """The process's controller of (endpoint, model), made on first use; a later run asking a
    higher ceiling raises it (each run's items stay within its own `concurrency` too).

    Args:
        base_url: the endpoint.
        model: the model called there.
        ceiling: the run's `concurrency`.
        rpm: the target's `rate_limits.rpm`, if any (the lowest given wins).
    """
    name = f"{base_url.rstrip('/')} {model}"
    controller = _controllers.get(name)
    if controller is None:
        controller = _controllers[name] = RateController(name, ceiling, rpm=rpm)
    else:
        controller.ceiling = max(controller.ceiling, ceiling)
        if rpm is not None:
            controller.rpm = min(controller.rpm or rpm, rpm)
    return controller


def rate_history(target: Any) -> dict[str, Any] | None:
    """The state and history of the controller a run's target spec calls through, if any (what
    is stored with the run as `rate_control`)."""
    base_url, model = getattr(target, "base_url", None), getattr(target, "model", None)
    controller = _controllers.get(f"{str(base_url).rstrip('/')} {model}") if base_url and model else None
    return controller.summary() if controller is not None else None
