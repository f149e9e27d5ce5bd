"""Money and tokens: prices, accounting records, ledgers and the budget.

Every model call made through `assay.calls.chat.ChatClient` is measured into the `Ledger` of the scope
it runs in (an item's generation, or one scorer's judging) and priced with the run's
`PriceTable`. A call to a model with no price makes the record `incomplete` (reason `unpriced`),
never a silent $0; a target Assay cannot see into (a Python function) is `incomplete` with reason
`uninstrumented`. Caller-reported cost is kept apart (`caller_cost_usd`) and never summed here.

The `Budget` is admission control: once measured spend reaches the limit no new item starts, a
call not yet sent is denied (`assay.errors.BudgetDenied`), and model-graded scorers are skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from functools import lru_cache
from importlib import resources
from typing import TYPE_CHECKING, Any, Self, TypedDict

from pydantic import BaseModel, ConfigDict, Field

from assay.errors import BudgetDenied, SpecError
from assay.outcomes import (
    SPEND_KINDS,
    TOKEN_COLUMNS,
    TOKEN_KINDS,
    BudgetClosedBy,
    BudgetStatus,
    Completeness,
    CostReason,
    SpendKind,
    spend_column,
)

if TYPE_CHECKING:
    from assay.calls.capture import Scope
    from assay.calls.response_cache import ResponseCache

_MILLION = 1_000_000


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts as the provider reported them; None where it reported nothing. One field
    `<kind>_tokens` per `assay.outcomes.TokenKind`, in its order (a test keeps them in step)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    reasoning_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None

    @classmethod
    def of_kinds(cls, counts: Mapping[str, int | None]) -> Usage:
        """Usage from counts by token kind (a kind left out is unknown)."""
        return cls(**{f"{kind}_tokens": counts.get(kind) for kind in TOKEN_KINDS})

    def by_kind(self) -> dict[str, int | None]:
        """The counts by token kind, every kind of `TokenKind` a key."""
        return {kind: getattr(self, field) for kind, field in _USAGE_FIELDS}


# Built once: these run for every call and every item.
_USAGE_FIELDS = tuple((kind, f"{kind}_tokens") for kind in TOKEN_KINDS)
_COLUMN_FIELDS = tuple(
    (column, f"{kind}_tokens") for column, kind in zip(TOKEN_COLUMNS, TOKEN_KINDS, strict=True)
)
_SPEND_COLUMNS = {kind: spend_column(kind) for kind in SPEND_KINDS}


def token_columns(usage: Usage | None) -> dict[str, int | None]:
    """The `tokens_<kind>` columns of a usage: null for a kind it did not report, or all of
    them without one."""
    if usage is None:
        return dict.fromkeys(TOKEN_COLUMNS)
    return {column: getattr(usage, field) for column, field in _COLUMN_FIELDS}


class Price(BaseModel):
    """USD per million tokens for one model.

    Args:
        input: uncached input tokens.
        output: output tokens (reasoning tokens are counted among them, as providers bill them).
        cached_input: input tokens read from the provider's prompt cache; default the input price.
        cache_write: input tokens written to the provider's prompt cache (Anthropic bills them
            above the input price); default the input price.
        batch: the prices of the same calls made through the provider's batch API (half, at
            OpenAI and Anthropic); a model without them is unpriced in batch mode.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0)
    output: float = Field(ge=0)
    cached_input: float | None = Field(default=None, ge=0)
    cache_write: float | None = Field(default=None, ge=0)
    batch: Price | None = None


class PriceTable:
    """Prices by exact model name: the shipped table (`assay/data/prices.json`) with a spec's
    `prices:` laid over it.

    Args:
        prices: model name -> price.
    """

    def __init__(self, prices: dict[str, Price]) -> None:
        self.prices = prices

    @classmethod
    def shipped(cls, overrides: dict[str, Price] | None = None) -> PriceTable:
        raw = json.loads(resources.files("assay").joinpath("data/prices.json").read_text())
        table = {name: Price.model_validate(value) for name, value in raw.items() if not name.startswith("_")}
        return cls({**table, **(overrides or {})})

    def cost(self, model: str | None, usage: Usage | None, *, batch: bool = False) -> float | None:
        """The call's cost in USD, or None when the model has no price (no batch price, for a
        batched call) or usage is unknown.

        `usage.input_tokens` counts all input; cache reads (`cached_tokens`) and cache writes
        (`cache_write_tokens`) are parts of it, each billed at its own price."""
        price = self.prices.get(model or "")
        if batch and price is not None:
            price = price.batch
        if price is None or usage is None or usage.input_tokens is None or usage.output_tokens is None:
            return None
        cached = min(usage.cached_tokens or 0, usage.input_tokens)
        written = min(usage.cache_write_tokens or 0, usage.input_tokens - cached)
        cached_price = price.input if price.cached_input is None else price.cached_input
        write_price = price.input if price.cache_write is None else price.cache_write
        return (
            (usage.input_tokens - cached - written) * price.input
            + cached * cached_price
            + written * write_price
            + usage.output_tokens * price.output
        ) / _MILLION


@dataclass(slots=True)
class Accounting:
    """What a scope (a call, an item, a scorer, a run) cost, and how far that figure holds."""

    known_cost: float = 0.0
    completeness: Completeness = Completeness.COMPLETE
    reasons: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TOKEN_KINDS, 0))
    operations: int = 0
    settled: int = 0
    unknown: int = 0
    denied: int = 0
    cached: int = 0
    batched: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    # Plain-string keys: iterating the enum class on every record is measurably slow on the hot path.
    breakdown: dict[str, float] = field(default_factory=lambda: dict.fromkeys(SPEND_KINDS, 0.0))

    @classmethod
    def of_call(
        cls,
        kind: SpendKind,
        model: str | None,
        usage: Usage | None,
        prices: PriceTable,
        *,
        batch: bool = False,
    ) -> Accounting:
        """A settled model call: priced when the table knows the model (at its batch price, for
        a call made through a batch API), else incomplete."""
        cost = prices.cost(model, usage, batch=batch)
        record = cls(
            operations=1,
            settled=1,
            batched=int(batch),
            by_kind={kind.value: 1},
            tokens=(
                {name: getattr(usage, field) or 0 for name, field in _USAGE_FIELDS}
                if usage is not None
                else dict.fromkeys(TOKEN_KINDS, 0)
            ),
        )
        if cost is None:
            record.completeness = Completeness.INCOMPLETE
            record.reasons = {CostReason.UNPRICED.value: 1}
        else:
            record.known_cost = cost
            record.breakdown[kind.value] = cost
        return record

    @classmethod
    def of_lost_call(cls, kind: SpendKind) -> Accounting:
        """A call whose fate is unknown (timed out, connection dropped): it may have been billed."""
        return cls(
            completeness=Completeness.INCOMPLETE,
            reasons={CostReason.UNKNOWN_OUTCOME.value: 1},
            operations=1,
            unknown=1,
            by_kind={kind.value: 1},
        )

    @classmethod
    def of_unsent_call(cls, kind: SpendKind) -> Accounting:
        """A call that never left (its connection was refused): it cost nothing, for certain."""
        return cls(operations=1, by_kind={kind.value: 1})

    @classmethod
    def of_denied_call(cls, kind: SpendKind) -> Accounting:
        """A call the budget refused before it was sent: it cost nothing."""
        return cls(operations=1, denied=1, by_kind={kind.value: 1})

    @classmethod
    def of_cache_hit(cls, kind: SpendKind) -> Accounting:
        """A reply served from the response cache: an operation that cost nothing."""
        return cls(operations=1, settled=1, cached=1, by_kind={kind.value: 1})

    @classmethod
    def uninstrumented(cls) -> Accounting:
        """A scope Assay cannot see into (a Python target): its spend is not known."""
        return cls(completeness=Completeness.INCOMPLETE, reasons={CostReason.UNINSTRUMENTED.value: 1})

    @classmethod
    def total(cls, records: list[Accounting]) -> Accounting:
        """The sum of records: unverified if any is, else incomplete if any is, else complete."""
        # Records of scopes that made no call add nothing; most items have one record that counts.
        records = [r for r in records if r.operations or r.completeness is not Completeness.COMPLETE]
        if len(records) == 1:
            return records[0]
        out = cls()
        for record in records:
            out.known_cost += record.known_cost
            for name, n in record.reasons.items():
                out.reasons[name] = out.reasons.get(name, 0) + n
            for name, n in record.tokens.items():
                out.tokens[name] = out.tokens.get(name, 0) + n
            out.operations += record.operations
            out.settled += record.settled
            out.unknown += record.unknown
            out.denied += record.denied
            out.cached += record.cached
            out.batched += record.batched
            for name, n in record.by_kind.items():
                out.by_kind[name] = out.by_kind.get(name, 0) + n
            for name, usd in record.breakdown.items():
                out.breakdown[name] = out.breakdown.get(name, 0.0) + usd
        kinds = {record.completeness for record in records}
        if Completeness.UNVERIFIED in kinds:
            out.completeness = Completeness.UNVERIFIED
        elif Completeness.INCOMPLETE in kinds:
            out.completeness = Completeness.INCOMPLETE
        return out

    def columns(self) -> dict[str, Any]:
        """The record as store columns (docs/schema.md)."""
        return {
            "cost_usd": self.known_cost,
            **{_SPEND_COLUMNS[kind]: usd for kind, usd in self.breakdown.items()},
            "cost_completeness": self.completeness.value,
            "cost_reasons": _counts_json(tuple(self.reasons.items())) if self.reasons else None,
            "operations": self.operations,
            "operations_settled": self.settled,
            "operations_unknown": self.unknown,
            "operations_denied": self.denied,
            "operations_cached": self.cached,
            "operations_batched": self.batched,
            "operations_by_kind": _counts_json(tuple(self.by_kind.items())) if self.by_kind else None,
        }


@lru_cache(maxsize=1024)
def _counts_json(counts: tuple[tuple[str, int], ...]) -> str:
    """Counts as the store's JSON text, sorted by key. Cached: nearly every item of a run has the
    same few (`{"generation": 1}`), and this runs twice an item."""
    return json.dumps(dict(counts), sort_keys=True)


# -- ledgers: where the calls of one scope are measured ------------------------------------------


class Ledger:
    """The calls of one scope (an item's generation, or one scorer on one item), with the run's
    prices they are measured with and the budget that admits them. `with Ledger(...) as ledger:`
    measures (and captures) every model call made inside the block, in this task.

    Args:
        kind: what the scope's spend is for.
        prices: the run's price table.
        budget: the run's budget.
        capture: where the scope's calls are captured, when the run captures requests.
        cache: the store's response cache, for clients that opted in.
    """

    def __init__(
        self,
        kind: SpendKind,
        prices: PriceTable,
        budget: Budget,
        capture: Scope | None = None,
        cache: ResponseCache | None = None,
    ) -> None:
        self.kind = kind
        self.prices = prices
        self.budget = budget
        self.capture = capture
        self.cache = cache
        self.records: list[Accounting] = []
        self._token: Token[Ledger | None] | None = None

    def __enter__(self) -> Self:
        self._token = _current.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _current.reset(self._token)

    def add(self, record: Accounting) -> None:
        self.records.append(record)

    def total(self) -> Accounting:
        return Accounting.total(self.records)


_current: ContextVar[Ledger | None] = ContextVar("assay_ledger", default=None)


def current_ledger() -> Ledger | None:
    return _current.get()


# -- the budget ------------------------------------------------------------------------------------


_BUDGET = re.compile(r"^\$?(\d+(?:\.\d+)?)$")


def parse_budget(text: str | float) -> float:
    """`"$5"`, `"0.50"` or a number -> USD; anything else is a `SpecError`."""
    match = _BUDGET.match(str(text).strip()) if not isinstance(text, bool) else None
    if match is None:
        raise SpecError(f'Invalid budget "{text}": expected a non-negative USD amount')
    return float(match.group(1))


class BudgetColumns(TypedDict):
    """The budget's columns of a run's record (`runs.budget_*`)."""

    budget_limit_usd: float | None
    budget_spent_usd: float | None
    budget_status: str | None
    budget_closed_by: str | None


class Budget:
    """Admission control over a run's measured spend.

    Args:
        limit_usd: the limit; None for no budget (nothing is ever refused).
        spent_usd: what earlier executions of the run already spent (a resumed run).
    """

    def __init__(self, limit_usd: float | None, spent_usd: float = 0.0) -> None:
        self.limit_usd = limit_usd
        self.spent_usd = spent_usd
        # Held for calls sent whose cost is not known yet (a batch's requests, at their maximum).
        self.reserved_usd = 0.0
        self.closed_by: BudgetClosedBy | None = None

    @property
    def closed(self) -> bool:
        return self.limit_usd is not None and self.spent_usd + self.reserved_usd >= self.limit_usd

    def spend(self, usd: float) -> None:
        self.spent_usd += usd

    def reserve(self, usd: float) -> None:
        """Count `usd` against the limit until `release`d: a call sent whose cost arrives later."""
        self.reserved_usd += usd

    def release(self, usd: float) -> None:
        self.reserved_usd = max(0.0, self.reserved_usd - usd)

    def admit(self) -> None:
        """Called before a model call is sent: raises `BudgetDenied` once the budget is closed."""
        if self.closed:
            self.note_closure(BudgetClosedBy.OPERATION)
            raise BudgetDenied(f"budget ${self.limit_usd:g} reached (spent ${self.spent_usd:.6f})")

    def note_closure(self, source: BudgetClosedBy) -> None:
        """Record what first met the closed budget: a `case` (item) not started, an `operation`
        (call) denied, or a `scorer` skipped."""
        if self.closed and self.closed_by is None:
            self.closed_by = source

    def columns(self) -> BudgetColumns:
        return {
            "budget_limit_usd": self.limit_usd,
            "budget_spent_usd": self.spent_usd if self.limit_usd is not None else None,
            "budget_status": None if self.limit_usd is None else self._status().value,
            "budget_closed_by": self.closed_by.value if self.closed_by is not None else None,
        }

    def _status(self) -> BudgetStatus:
        return BudgetStatus.CLOSED if self.closed else BudgetStatus.OPEN
