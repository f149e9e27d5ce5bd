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
    """What became of one scorer on one item x trial. `measured` is a gauge row's only outcome
    (`RowKind.GAUGE`); a scorer's row never has it."""

    SCORED = "scored"
    FAILED = "failed"
    SKIPPED = "skipped"
    CANCELLED = "cancelled"
    BUDGET_SKIPPED = "budget_skipped"
    BUDGET_INTERRUPTED = "budget_interrupted"
    MEASURED = "measured"


class RowKind(StrEnum):
    """What a row of the scores dataset holds.

    `score`: a scorer's judgement of one item x trial, in [0, 1]. `gauge`: a measurement of the
    target's work on one completed item x trial (duration, steps, tokens…), in its own unit; its
    outcome is always `measured` and its `score` null, so neither summaries, compares nor gates
    ever read it as a scorer.
    """

    SCORE = "score"
    GAUGE = "gauge"


GAUGE_PREFIX = "gauge."


class Gauge(StrEnum):
    """The gauges Assay writes (their `scorer` name on `kind = gauge` rows); the suffix is the unit.

    The `gauge.` prefix keeps them apart from scorers, whose names may not start with it. A gauge
    whose value is unknown for an item (a target that reports no usage, an agent without a
    trajectory) has no row: missing means unknown, never 0.
    """

    DURATION_MS = "gauge.duration_ms"
    STEPS = "gauge.steps"
    TOOL_CALLS = "gauge.tool_calls"
    TOKENS_INPUT = "gauge.tokens_input"
    TOKENS_OUTPUT = "gauge.tokens_output"
    COST_USD = "gauge.cost_usd"


class TurnMethod(StrEnum):
    """How a prompt entered its session: the first prompt, or one continuing the conversation."""

    START = "start"
    RESUME = "resume"


class RunKind(StrEnum):
    RUN = "run"
    RESCORE = "rescore"


class RunStatus(StrEnum):
    """`running` until the flow finishes; `failed_gate` when the item-error-rate gate trips;
    `cancelled` by Ctrl-C, SIGTERM or a Prefect cancel; `failed` when something other than a
    target's failure stopped it (the run's `error` says what); `unavailable` when a scorer's gold
    check failed before anything ran. A cancelled or failed run continues with `assay resume`."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED_GATE = "failed_gate"
    CANCELLED = "cancelled"
    FAILED = "failed"
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
