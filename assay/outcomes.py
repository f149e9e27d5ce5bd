"""Every word Assay stores or prints, defined once.

The words are part of the contract: gates, dashboards and analysts' queries read them. Writers
and readers use these enums (a StrEnum member *is* its string, so `row["outcome"] == "failed"`
and `ItemOutcome.FAILED` agree); `assay/_schema/` builds its column descriptions from them and
`docs/update_schema.py` writes the enum table of `docs/schema.md` from them (a test keeps the two
in step).
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
    check failed before anything ran; `stopped_early` when its sequential compare (`compare_to`)
    reached a verdict and the run stopped admitting items (the run's `compare_*` columns say
    which, after how many items). A cancelled or failed run continues with `assay resume`."""

    RUNNING = "running"
    COMPLETED = "completed"
    FAILED_GATE = "failed_gate"
    CANCELLED = "cancelled"
    FAILED = "failed"
    UNAVAILABLE = "unavailable"
    STOPPED_EARLY = "stopped_early"


class FailureKind(StrEnum):
    """Why a target call failed, in one word an analyst can group by.

    The first five are calls that got no usable reply: `http` (an error status or error event),
    `timeout`, `connection`, `protocol` (a reply off the wire format), `exception` (the target's
    own code raised). The next three are replies that are *not an answer* (`FinishReason` says
    why the model stopped): `refusal` (the model refused, or the provider's content filter
    withheld the answer), `length` (cut off by the length limit: `max_tokens`) and
    `unasked_tool_call` (the model called a tool though the request offered none; when tools
    are asked for, a tool call is the answer). The last, `max_tool_rounds`, is a chat target
    running its tools (`tool_loop`) that ran them `max_tool_rounds` times and was still asked
    for more: the model never answered in words. They are failures, not outcomes of their own,
    so that everything that reads `failed` stays right without knowing them: they are never
    scored, they count against `fail_on_item_error_rate` (the scored mean covers only the
    answered items, as with any failure), a resume keeps them, `assay resume --retry-failed
    refusal,length` asks again, and the summary counts failures by kind (`failure_kinds`).
    """

    HTTP = "http"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    PROTOCOL = "protocol"
    EXCEPTION = "exception"
    REFUSAL = "refusal"
    LENGTH = "length"
    UNASKED_TOOL_CALL = "unasked_tool_call"
    MAX_TOOL_ROUNDS = "max_tool_rounds"


class FinishReason(StrEnum):
    """Why a model stopped, in one word over providers (`items.finish_reason`,
    `turns.finish_reason`, `requests.finish_reason`; the provider's own word is kept beside it,
    `finish_reason_raw`).

    `stop`: a natural end or a stop sequence (OpenAI `stop`; Anthropic `end_turn`,
    `stop_sequence`). `length`: the output limit cut it (`length`; `max_tokens`,
    `model_context_window_exceeded`). `tool_call`: the model called a tool (`tool_calls`,
    `function_call`, or tool calls in the message; `tool_use`). `refusal`: the model refused
    (a message with `refusal`; `refusal`). `content_filter`: the provider's filter withheld the
    content (`content_filter`). `other`: any other word (Anthropic's `pause_turn`, a gateway's
    own). Null when the provider sent none.
    """

    STOP = "stop"
    LENGTH = "length"
    TOOL_CALL = "tool_call"
    REFUSAL = "refusal"
    CONTENT_FILTER = "content_filter"
    OTHER = "other"


class Verdict(StrEnum):
    """A compare's conclusion for one scorer, against its threshold."""

    REGRESSED = "regressed"
    IMPROVED = "improved"
    UNCHANGED = "unchanged"
    INCONCLUSIVE = "inconclusive"


class IntervalMethod(StrEnum):
    """Which method produced a stored confidence interval (`docs/statistics.md`).

    `bootstrap`: paired bootstrap percentile. `newcombe`: Newcombe's paired score interval (binary
    scorers, fewer than 300 pairs). `wilson`: Wilson's score interval of one binary run's mean
    (fewer than 300 scores). `t`: Student t. `betting_cs`: the anytime-valid betting confidence
    sequence of a sequential compare (Waudby-Smith & Ramdas 2024).
    """

    BOOTSTRAP = "bootstrap"
    NEWCOMBE = "newcombe"
    WILSON = "wilson"
    T = "t"
    BETTING_CS = "betting_cs"


class Adjustment(StrEnum):
    """How verdicts over several scorers or cells are adjusted for being many: `holm` controls
    the family-wise error rate, `bh` (Benjamini–Hochberg) the false discovery rate, `none` neither."""

    NONE = "none"
    HOLM = "holm"
    BH = "bh"


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
    """What an operation's spend was for: `cost_<kind>_usd` columns, `operations_by_kind` keys
    and a captured request's `kind`."""

    GENERATION = "generation"
    JUDGING = "judging"
    EXTERNAL = "external"


# Plain strings, in order: iterating an enum class costs more than a tuple on the hot path.
SPEND_KINDS: tuple[str, ...] = tuple(kind.value for kind in SpendKind)


class CostReason(StrEnum):
    """Why an accounting record is `incomplete` (the keys of `cost_reasons`, with counts).

    `unpriced`: a model missing from the price table. `uninstrumented`: a target Assay cannot see
    into (a Python function). `unknown_outcome`: a call whose fate is unknown (a timeout, a
    dropped connection), which may have been billed.
    """

    UNPRICED = "unpriced"
    UNINSTRUMENTED = "uninstrumented"
    UNKNOWN_OUTCOME = "unknown_outcome"


class TokenKind(StrEnum):
    """The kinds of token a provider reports. Each is a `tokens_<kind>` column (items, scores,
    runs, turns), a `<kind>_tokens` field of `assay.calls.accounting.Usage` and a key of an
    accounting record's `tokens`, of a summary's `tokens` and of the report's token columns."""

    INPUT = "input"
    OUTPUT = "output"
    REASONING = "reasoning"
    CACHED = "cached"
    CACHE_WRITE = "cache_write"


TOKEN_KINDS: tuple[str, ...] = tuple(kind.value for kind in TokenKind)


def spend_column(kind: str) -> str:
    """The store column of a spend kind's measured cost: `cost_<kind>_usd`."""
    return f"cost_{kind}_usd"


def token_column(kind: str) -> str:
    """The store column of a token kind: `tokens_<kind>`."""
    return f"tokens_{kind}"


TOKEN_COLUMNS: tuple[str, ...] = tuple(token_column(kind) for kind in TOKEN_KINDS)


class BudgetStatus(StrEnum):
    """`runs.budget_status`: whether the run's budget still admits work (null without a budget)."""

    OPEN = "open"
    CLOSED = "closed"


class BudgetClosedBy(StrEnum):
    """`runs.budget_closed_by`: what first met the closed budget — an item (`case`) not started,
    a model call (`operation`) refused before it was sent, or a model-graded `scorer` skipped."""

    CASE = "case"
    OPERATION = "operation"
    SCORER = "scorer"


class CaptureStatus(StrEnum):
    """`runs.capture_status`, the request sidecar's manifest: `off` (not asked for), `complete`,
    `truncated` (a limit dropped records; `capture_reason` says which) or `unavailable` (capture
    itself failed, and stopped for the rest of the run)."""

    OFF = "off"
    COMPLETE = "complete"
    TRUNCATED = "truncated"
    UNAVAILABLE = "unavailable"


class RequestPhase(StrEnum):
    """`requests.phase`: which moment of a model call a captured record is — the request
    (`start`), one HTTP exchange (`attempt`) or how the call ended (`end`)."""

    START = "start"
    ATTEMPT = "attempt"
    END = "end"


class RequestOutcome(StrEnum):
    """`requests.outcome` of an `end` record: the call got its answer (`ok`), was answered by the
    response cache (`cache_hit`, free), failed for good (`failed`), or was refused by the budget
    before it was sent (`budget_denied`)."""

    OK = "ok"
    CACHE_HIT = "cache_hit"
    FAILED = "failed"
    BUDGET_DENIED = "budget_denied"


class BatchState(StrEnum):
    """`batches.state`: a provider batch (batch mode) is `in_progress` from the moment the
    provider accepted it until it `ended` (every request answered, errored, expired or cancelled)."""

    IN_PROGRESS = "in_progress"
    ENDED = "ended"


class TrajectoryStatus(StrEnum):
    """How an http_agent's trajectory read (`trajectory_status` in `items.caller_metadata` and in
    its `trajectory.json`), in evalkit's words (docs/trajectories.md): `valid`, `partial` (some
    steps dropped; an ATIF document marked partial), `invalid` (none usable; an ATIF document that
    breaks the contract) or `unavailable` (the harness gave none)."""

    VALID = "valid"
    PARTIAL = "partial"
    INVALID = "invalid"
    UNAVAILABLE = "unavailable"


class Gate(StrEnum):
    """A comparison's gates (`gate` in `comparison.json`): a side's item error rate, a side's
    scorer error rate, a scorer's verdict."""

    ITEM_ERROR_RATE = "item_error_rate"
    SCORER_ERROR_RATE = "scorer_error_rate"
    VERDICT = "verdict"
