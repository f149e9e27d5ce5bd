"""The adaptive rate controller: an AIMD window of calls in flight, `concurrency` its ceiling.

Every HTTP attempt to the endpoint takes a slot of its controller (`ChatClient(gate=…)`): a retry
waits for a slot like a first attempt, so retries after a 429 are paced too. The run's items stay
within its own `concurrency` as before. Every attempt's status and headers come back through
`Peer.on_response` (`assay.calls.http`). The controller keeps a window — how many calls may be
in flight — and moves it as TCP moves its congestion window:

- **slow start**: the window starts small (`START_WINDOW`) and grows by one per success (doubling
  every round trip) until the first rate-limit answer or the ceiling;
- **multiplicative decrease**: a 429 or 529 halves the window — once per window: refusals of calls
  that were already in flight at the last decrease count once — and no call is sent until the
  server's `Retry-After` (or its `x-ratelimit-reset-requests`) has passed;
- **additive increase**: after that, each success adds 1 / window (one slot per round trip);
- **the server's own count**: while `x-ratelimit-remaining-requests` (Anthropic's
  `anthropic-ratelimit-requests-remaining`) is no more than the calls in flight, the window holds
  instead of growing; a reply saying it is 0 pauses new calls until `x-ratelimit-reset-requests`
  (`anthropic-ratelimit-requests-reset`; at most 1 s), before any 429;
- **the pace** (`Pace`): a window bounds calls in flight, not calls a second — at 20 ms a reply
  one slot makes 50 calls a second — so once the provider refuses, calls are also spaced to a
  rate learned from what it says (the limit it announces, wherever the header appears) and does
  (the rate it admitted calls at while it refused), growing back while calls wait for it;
- `rate_limits: {rpm, tpm}` (optional, per target) paces calls to at most that many requests /
  tokens a minute (a call's tokens estimated before it leaves, corrected by its usage: `settle`).

`assay.calls.rate.controller_for` gives the controller of an (endpoint, model): this class, one
per process, or a member of a fleet's (`assay.calls.fleet`), with the same interface. The
controller's history — (seconds since it started, window, in flight, 429s so far) — is stored
with each run.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Self

from assay.calls import waits
from assay.calls.headers import STANDARD
from assay.calls.http import RATE_LIMIT_STATUSES, retry_after

START_WINDOW = 4
DECREASE = 0.5
INCREASE = 0.5  # slots per window of successes once past slow start
_HISTORY_EVERY_S = 0.5
_MAX_RESET_PAUSE_S = 1.0
_MAX_HISTORY = 2_000
# The learned pace (`Pace`).
PACE_DECREASE = 0.85  # a refusal: pace at this fraction of the rate the provider was admitting
PACE_PROBE = 0.02  # then grow by this fraction of that rate a second, the step doubling ...
PACE_DOUBLING_S = 1.0  # ... every this many seconds without a refusal
PACE_RELEASE = 8.0  # grown to this multiple of the rate it was cut to, the pace lets go: unpaced
ACCEPTED_SPAN_S = 1.0  # the admitted rate is measured over the last second of answers
MIN_PACE = 1 / 60  # one call a minute
_CATCH_UP_S = 0.05
_DURATION = re.compile(
    r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?!s))?(?:(\d+(?:\.\d+)?)s)?(?:(\d+(?:\.\d+)?)ms)?"
)


# The hints read, under their standard names (`assay.calls.headers.ResponseHeaders.hints` finds
# them wherever the provider or gateway sent them: Anthropic's, a LiteLLM proxy's `llm_provider-*`).
RETRY_AFTER = STANDARD["retry_after"]
REMAINING = STANDARD["remaining_requests"]
RESET = STANDARD["reset_requests"]
LIMIT = STANDARD["limit_requests"]


def reset_seconds(value: str | None, *, now: datetime | None = None) -> float | None:
    """Seconds until a rate limit resets: OpenAI's `x-ratelimit-reset-*` durations (`"1s"`,
    `"6m0s"`, `"20ms"`, `"0.5s"`), plain seconds, or Anthropic's RFC 3339 time
    (`"2026-12-01T06:00:30Z"`; a time past is 0); None when absent or unreadable.

    Args:
        value: the header's value.
        now: the time an RFC 3339 time is counted from (default: now).
    """
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    match = _DURATION.fullmatch(value.strip())
    if not match or not any(match.groups()):
        try:
            when = datetime.fromisoformat(value.strip())
        except ValueError:
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())
    hours, minutes, seconds, millis = (float(g) if g else 0.0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds + millis / 1000


def _remaining(headers: Mapping[str, str]) -> int | None:
    value = headers.get(REMAINING)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _limit(headers: Mapping[str, str]) -> float | None:
    value = headers.get(LIMIT)
    try:
        limit = float(value) if value is not None else None
    except ValueError:
        return None
    return limit if limit and limit > 0 else None


def lower(a: float | None, b: float | None) -> float | None:
    """The lower of two limits, either of which may be unset (None)."""
    return min(a, b) if a and b else a or b


class Pace:
    """The rate of calls a provider admits, learned from what it says and what it does: a pace
    (calls a second) the controller spaces its calls to, on top of the window.

    - none until the first refusal: an endpoint that never refuses is never paced;
    - a limit the provider announces (`x-ratelimit-limit-requests`, a minute's worth, on any
      reply) caps the pace;
    - a refusal (once per window, as the window halves) sets the pace to `PACE_DECREASE` of the
      rate the provider admitted over the last `ACCEPTED_SPAN_S` — what it does: while calls are
      refused, the calls it lets through are its limit (or this process's part of it) — and at
      most to the announced limit;
    - while calls wait for their turn, it grows: by `PACE_PROBE` of the rate it was set to per
      second, the step doubling every `PACE_DOUBLING_S` without a refusal, so it climbs back
      slowly near the rate refused at and fast when the room is larger (another run ended);
    - grown to `PACE_RELEASE` times the rate it was cut to (with no announced limit to hold it),
      it lets go: the provider has room again, and its next refusal learns a new pace.
    """

    __slots__ = ("_accepted", "_cut_at", "_cut_to", "_grown_at", "_since", "announced", "bound", "per_s")

    def __init__(self) -> None:
        self.announced: float | None = None  # requests a minute the provider says it allows
        self.per_s: float | None = None  # the pace; None: unpaced
        self.bound = False  # a call waited for its turn since the pace last grew
        self._accepted: deque[float] = deque()  # when recent calls were admitted
        self._since: float | None = None  # the first answer
        self._cut_at = 0.0
        self._cut_to = 0.0
        self._grown_at = 0.0

    def answered(self, ok: bool, headers: Mapping[str, str], now: float) -> None:
        """One answer: admitted (`ok`) or refused for rate."""
        if self._since is None:
            self._since = now
        if (limit := _limit(headers)) is not None:
            self.announced = limit
            if self.per_s is not None:
                self.per_s = min(self.per_s, limit / 60)
        if not ok:
            return
        self._accepted.append(now)
        self._forget(now)
        if self.per_s is not None and self.bound:
            # The doubling stops at the release: past it the step only overflows (2 ** 1024).
            doublings = min((now - self._cut_at) / PACE_DOUBLING_S, math.log2(PACE_RELEASE / PACE_PROBE))
            self.per_s += PACE_PROBE * self._cut_to * 2**doublings * (now - self._grown_at)
            if self.announced:
                self.per_s = min(self.per_s, self.announced / 60)
            elif self.per_s >= PACE_RELEASE * self._cut_to:
                self.per_s = None  # far past the rate refused at: no longer a limit, as before it
            self.bound = False
        self._grown_at = now

    def admitted_per_s(self, now: float) -> float | None:
        """The rate the provider admitted calls at, over the last `ACCEPTED_SPAN_S`."""
        self._forget(now)
        span = min(ACCEPTED_SPAN_S, now - (now if self._since is None else self._since))
        return len(self._accepted) / span if self._accepted and span > 0 else None

    def _forget(self, now: float) -> None:
        accepted = self._accepted
        while accepted and accepted[0] < now - ACCEPTED_SPAN_S:
            accepted.popleft()

    def refused(self, now: float) -> None:
        """A refusal that is news: pace below what the provider admitted."""
        rates = [r for r in (self.per_s, self.admitted_per_s(now), (self.announced or 0) / 60) if r]
        if not rates:  # nothing admitted yet, no limit said: the window and the pause act alone
            return
        self.per_s = max(MIN_PACE, min(rates) * PACE_DECREASE)
        self._cut_at = self._grown_at = now
        self._cut_to = self.per_s
        self.bound = False

    @property
    def rpm(self) -> float | None:
        return self.per_s * 60 if self.per_s is not None else None


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
        tpm: at most this many tokens a minute (estimated before a call, corrected by its usage).
    """

    share = "local"  # the backend's name, stored with the run
    share_url = "local"  # the setting it was made from

    def __init__(
        self, name: str, ceiling: int, *, rpm: float | None = None, tpm: float | None = None
    ) -> None:
        self.name = name
        self.ceiling = ceiling
        self.rpm = rpm
        self.tpm = tpm
        self.waiting = 0
        self.paused_s = 0.0  # total time no call could leave because of a refusal or reset
        self.limit = float(min(ceiling, START_WINDOW))
        self.threshold = float(ceiling)  # slow start ends here (halved on a rate limit)
        self.in_flight = 0
        self.rate_limited = 0
        self.responses = 0
        self._paused_until = 0.0
        self._outstanding = 0  # calls in flight at the last decrease
        self._since_decrease = 0  # answers since then
        self.pace = Pace()
        self._next_send = 0.0
        self._next_tokens = 0.0
        self._freed: asyncio.Event | None = None
        self._started = time.monotonic()
        self._sampled = 0.0
        self.history: list[Sample] = []
        self._sample(force=True)

    # -- admission ------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    async def acquire(self, tokens: int = 0) -> None:
        """Wait for a slot (and, under `rpm` / `tpm`, for the call's turn), then take it."""
        self.waiting += 1
        try:
            while True:
                wait = self._try_take(tokens)
                if wait is None:
                    return
                if wait > 0:
                    await self._sleep(wait)
                else:  # the window is full: wait for a call to end
                    self._window_full()
                    if self._freed is None:
                        self._freed = asyncio.Event()
                    freed = self._freed
                    await freed.wait()
        finally:
            self.waiting -= 1

    async def _sleep(self, wait: float) -> None:
        """Sleep `wait` seconds; a pause after a rate limit is told as a wait (the progress line's
        `waiting: mock-1 rate-limit pause in 2 s`), a turn at the pace is not."""
        until = self._paused_until
        if until <= time.monotonic():
            await asyncio.sleep(wait)
            return
        held = waits.Wait(f"{self.name.rpartition(' ')[2]} rate-limit pause", until)
        waits.began(held)
        try:
            await asyncio.sleep(wait)
        finally:
            waits.ended(held)

    def release(self) -> None:
        """Give back a slot taken by `acquire`."""
        self.in_flight -= 1
        self._wake()

    async def aclose(self) -> None:
        """A client calling through this controller is done (a fleet member hands its share
        back; a local controller has nothing to do)."""

    def _wake(self) -> None:
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    def _window_full(self) -> None:
        """A call waits for the window (a shared controller asks its fleet for more)."""

    def _try_take(self, tokens: int = 0) -> float | None:
        """Take a slot (None), or say how long to wait: seconds, or 0 for "until a call ends"."""
        now = time.monotonic()
        if now < self._paused_until:
            return self._paused_until - now
        if self.in_flight >= int(self.limit):
            return 0.0
        rpm, tpm = self.pacing()
        if rpm and now < self._next_send:
            self.waited_for_turn()
            return self._next_send - now
        if tpm and tokens and now < self._next_tokens:
            return self._next_tokens - now
        if rpm:
            # A call late for its turn (a busy event loop wakes a sleeper late) may make up for
            # it, by at most half a turn and 50 ms: the calls keep to `rpm` on average, and are
            # never more than that ahead of it.
            interval = 60.0 / rpm
            self._next_send = max(now - min(0.5 * interval, _CATCH_UP_S), self._next_send) + interval
        if tpm and tokens:
            self._next_tokens = max(now, self._next_tokens) + tokens * 60.0 / tpm
        self.in_flight += 1
        return None

    def waited_for_turn(self) -> None:
        """A call waited for its turn at the pace: the pace learned may grow, if it is the one in
        force (not a lower `rate_limits.rpm`, which would leave it growing untested)."""
        learned = self.pace.rpm
        if learned is not None and (not self.rpm or learned <= self.rpm):
            self.pace.bound = True

    def pacing(self) -> tuple[float | None, float | None]:
        """The requests and tokens a minute this controller's calls are paced to (None: unpaced):
        the lower of `rate_limits.rpm` and the pace learned, and `rate_limits.tpm`."""
        return lower(self.rpm, self.pace.rpm), self.tpm

    def settle(self, estimated: int, used: int | None) -> None:
        """Correct a call's token estimate by its usage (None: unknown, the estimate stands; 0: a
        refused call, which used none), so `tpm` paces what the calls really use."""
        _, tpm = self.pacing()
        if tpm and used is not None and estimated:
            self._next_tokens += (used - estimated) * 60.0 / tpm

    # -- feedback -------------------------------------------------------------------------------

    def observe(self, status: int | None, headers: Mapping[str, str]) -> None:
        """One attempt's answer (`assay.calls.http.ResponseHook`)."""
        self.responses += 1
        self._since_decrease += 1
        now = time.monotonic()
        self.pause_for(status, headers, now)
        if status in RATE_LIMIT_STATUSES:
            self.rate_limited += 1
            self.pace.answered(False, headers, now)
            # One decrease per window: refusals of calls sent before the last decrease (still in
            # flight then) say nothing new about the smaller window.
            if self._since_decrease >= self._outstanding:
                self.threshold = max(1.0, self.limit * DECREASE)
                self.limit = self.threshold
                self.pace.refused(now)
                self._outstanding, self._since_decrease = self.in_flight, 0
            self._sample(force=True)
            return
        if status is not None and status < 400:
            self.pace.answered(True, headers, now)
            remaining = _remaining(headers)
            if remaining is not None and remaining <= self.in_flight:
                pass  # the account is nearly used up: hold the window rather than grow into a 429
            elif self.limit < self.threshold:
                self.limit = min(self.limit + 1, self.ceiling)
            else:
                self.limit = min(self.limit + INCREASE / self.limit, self.ceiling)
        self._sample()

    def pause_for(self, status: int | None, headers: Mapping[str, str], now: float) -> None:
        """The pause an answer asks for: a refusal's `Retry-After` (else the limit's reset time,
        else 1 s); a success saying no request is left, until the limit's reset (at most 1 s)."""
        if status in RATE_LIMIT_STATUSES:
            wait = retry_after(headers.get(RETRY_AFTER))
            if wait is None:
                wait = reset_seconds(headers.get(RESET)) or 1.0
            self._pause_until(now, now + wait)
        elif status is not None and status < 400 and _remaining(headers) == 0:
            reset = reset_seconds(headers.get(RESET))
            if reset:
                self._pause_until(now, now + min(reset, _MAX_RESET_PAUSE_S))

    def new_episode(self) -> None:
        """A run starts while no call is in flight: its counts and history start afresh (what it
        stores is its own), the learned window and any pause carry on."""
        if self.in_flight or self.waiting:
            return  # another run of this process is calling: they share the counts too
        self.responses = self.rate_limited = 0
        self.paused_s = 0.0
        self.history = []
        self._started = time.monotonic()
        self._sample(force=True)

    def pause_left(self, now: float) -> float:
        """Seconds until a call may leave again (0 when none is paused)."""
        return max(0.0, self._paused_until - now)

    def _pause_until(self, now: float, until: float) -> None:
        """No call leaves before `until`; the time added to the pause is counted in `paused_s`."""
        if until > self._paused_until:
            self.paused_s += until - max(now, self._paused_until)
            self._paused_until = until

    def _sample(self, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._sampled < _HISTORY_EVERY_S:
            return
        self._sampled = now
        if len(self.history) >= _MAX_HISTORY:
            del self.history[: _MAX_HISTORY // 2 : 2]  # thin the oldest half, keep the shape
        self.history.append(
            Sample(now - self._started, self.window_limit(), self.in_flight, self.rate_limited)
        )

    def window_limit(self) -> float:
        """The window shown in the history (a fleet member shows the fleet's, not its share)."""
        return self.limit

    def summary(self) -> dict[str, Any]:
        """What is stored with a run: the settings, the totals and the history."""
        self._sample(force=True)
        return {
            "endpoint": self.name,
            "share": self.share,
            "ceiling": self.ceiling,
            "rpm": self.rpm,
            "tpm": self.tpm,
            "learned_rpm": round(self.pace.rpm, 1) if self.pace.rpm else None,
            "announced_rpm": self.pace.announced,
            "limit": round(self.window_limit(), 2),
            "peak": round(max((s.limit for s in self.history), default=self.window_limit()), 2),
            "responses": self.responses,
            "rate_limited": self.rate_limited,
            "paused_s": round(self.paused_s, 3),
            "history": {
                "columns": ["t", "limit", "in_flight", "rate_limited"],
                "rows": [s.as_list() for s in self.history],
            },
        }
