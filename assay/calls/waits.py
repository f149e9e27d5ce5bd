"""A call's waits between attempts (a retry's backoff, a rate limit's `Retry-After`), told to
whoever watches: the progress reporter, which says what the last items of a run are waiting on
rather than sitting at `29/30 … ETA 0:00:01`."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, eq=False, slots=True)
class Wait:
    """One wait before a call's next attempt.

    Args:
        what: what waits and for which attempt: `judge retry 2/5`, `target rate-limited, retry 1`.
        until: when the next attempt goes, in `time.monotonic()` seconds.
    """

    what: str
    until: float


# Told (wait, True) when a wait begins and (wait, False) when it ends.
Watcher = Callable[[Wait, bool], None]
_watcher: Watcher | None = None


def watch(watcher: Watcher | None) -> None:
    """Tell `watcher` of every wait in this process from now on (None: nobody)."""
    global _watcher
    _watcher = watcher


def began(wait: Wait) -> None:
    """A wait not a retry's: calls held by their endpoint's pause after a rate limit."""
    if _watcher is not None:
        _watcher(wait, True)


def ended(wait: Wait) -> None:
    if _watcher is not None:
        _watcher(wait, False)


class CallWaits:
    """One call's waits, for its retry loop: `before_sleep` as tenacity's hook, `end` when the
    next attempt starts (or the call ends).

    Args:
        who: what makes the call, as the progress line names it (`target`, `judge`).
        max_retries: the retries the call may make (rate-limit refusals are retried beyond them).
    """

    def __init__(self, who: str, max_retries: int) -> None:
        self._who, self._max_retries = who, max_retries
        self._current: Wait | None = None

    def before_sleep(self, state: Any) -> None:
        """tenacity's `before_sleep`: attempt `state.attempt_number` failed, the next waits."""
        self.end()
        exc = state.outcome.exception() if state.outcome else None
        retry = state.attempt_number
        if getattr(exc, "rate_limited", False):
            what = f"{self._who} rate-limited, retry {retry}"
        else:
            what = f"{self._who} retry {retry}/{self._max_retries}"
        sleep = state.next_action.sleep if state.next_action is not None else 0.0
        self._current = Wait(what, time.monotonic() + sleep)
        if _watcher is not None:
            _watcher(self._current, True)

    def end(self) -> None:
        if self._current is not None:
            if _watcher is not None:
                _watcher(self._current, False)
            self._current = None
