"""The circuit breaker: a run whose target refuses every call stops early instead of retrying
every item.

An endpoint that is down (a server not started, a wrong port) fails each item only after all its
retries — about 9 s an item with the default four — so a 1,000-item run would spend a long time
proving the same thing. Once `THRESHOLD` items in a row have failed to connect while none has
succeeded, the breaker trips: the run stops with `TargetUnreachable` naming the failure, the
finished items stay stored, the rest are counted `cancelled`, and `assay resume` runs them once
the endpoint answers — the refused ones too, which were never sent (`assay.run.plan.with_never_sent`). A single success disarms it for the rest of the execution: after that,
connection failures are the data of a flaky endpoint, not a dead one.
"""

from __future__ import annotations

from typing import Any

from assay.errors import TargetUnreachable
from assay.outcomes import FailureKind, ItemOutcome

THRESHOLD = 5


class CircuitBreaker:
    """Watches the items of one run's execution as they finish.

    Args:
        threshold: consecutive connection failures, with no success before them, that stop the run.
    """

    def __init__(self, threshold: int = THRESHOLD) -> None:
        self.threshold = threshold
        self._armed = True
        self._streak = 0
        self.stop: TargetUnreachable | None = None
        """Why it tripped, once it has: every shard of the execution stops on it."""

    def observe(self, item: dict[str, Any]) -> None:
        """Count one finished item's row. Raises `TargetUnreachable` when the breaker trips."""
        if not self._armed:
            return
        outcome = item["outcome"]
        if outcome == ItemOutcome.COMPLETED:
            self._armed = False
        elif outcome == ItemOutcome.FAILED and item.get("failure_kind") == FailureKind.CONNECTION:
            self._streak += 1
            if self._streak >= self.threshold:
                self.stop = TargetUnreachable(
                    f"{self._streak} items in a row failed to connect to the target and none "
                    f"succeeded ({item['error']}); stopped early, the rest cancelled"
                )
                raise self.stop
        else:  # it answered, with an error: not an unreachable endpoint
            self._streak = 0
