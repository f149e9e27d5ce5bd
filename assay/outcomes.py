"""Every enum Assay stores or prints, defined once.

The words are part of the contract: gates, dashboards and analysts' queries read them.
`docs/schema.md` has the same tables in prose; a test keeps the two in step.
"""

from __future__ import annotations

from enum import StrEnum


class ItemOutcome(StrEnum):
    """What became of one item x trial."""

    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BUDGET_SKIPPED = "budget_skipped"
    BUDGET_INTERRUPTED = "budget_interrupted"


class ScorerOutcome(StrEnum):
    """What became of one scorer on one item x trial."""

    SCORED = "scored"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    BUDGET_SKIPPED = "budget_skipped"
    BUDGET_INTERRUPTED = "budget_interrupted"


class TurnMethod(StrEnum):
    """How a prompt entered its session: the first prompt, or one continuing the conversation."""

    START = "start"
    RESUME = "resume"


class RunKind(StrEnum):
    RUN = "run"
    RESCORE = "rescore"


class RunStatus(StrEnum):
    """`running` until the flow finishes; `failed_gate` when the item-error-rate gate trips;
    `unavailable` when a scorer's gold check failed before anything ran."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED_GATE = "failed_gate"
    CANCELLED = "cancelled"
    UNAVAILABLE = "unavailable"


class FailureKind(StrEnum):
    """Why a target call failed, in one word an analyst can group by."""

    HTTP = "http"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    PROTOCOL = "protocol"
    EXCEPTION = "exception"


class Verdict(StrEnum):
    """A compare's conclusion for one scorer, against its threshold."""

    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"


class Completeness(StrEnum):
    """How far an accounting record's cost can be trusted.

    `complete`: every operation was measured and priced. `incomplete`: some were not (reasons say
    which: `unpriced`, `uninstrumented`, `unknown_outcome`). `unverified`: a figure nobody measured
    (e.g. a total reported by the caller) — never summed as if it were measured.
    """

    COMPLETE = "complete"
    INCOMPLETE = "incomplete"
    UNVERIFIED = "unverified"


class SpendKind(StrEnum):
    """What an operation's spend was for."""

    GENERATION = "generation"
    JUDGING = "judging"
    EXTERNAL = "external"
