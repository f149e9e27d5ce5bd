"""`TargetKind`: everything a run needs to know about one kind of target, in one place.

The run never asks which spec model its target is; it asks the target's kind
(`assay.targets.kind_of(spec.target)`), which answers, in the order a run asks:

    problems(spec, spec_dir, where)         before the dataset loads: what the spec names must
                                            exist (a `python` target's function imports)
    item_problems(spec, items, where)       every item can be asked (prompt templates fill)
    metered(spec, spec_dir)                 the model whose calls Assay measures, if any: the
                                            budget needs its price, `assay estimate` its tokens
    in_flight(spec, concurrency)            items a run keeps in flight (a batch's worth in
                                            batch mode)
    prepare(spec, items, spec_dir, stored)  preflight before anything runs; returns the snapshot
                                            kept on the run (a resume passes it back as `stored`)
    fixture_files(spec, items, spec_dir)    files whose bytes belong to the run's identity
    identity(spec)                          the target's part of the run's identity
    conversation(spec, item)                the turns an item's call sends (`messages:`), for
                                            the report
    open(spec, context)                     the live target (`assay.targets.Target`)

and two facts: `makes_containers` (the run's end cleans the Docker engine) and `live_attempts` (an
attempt stays alive while it is scored: the target is an `assay.targets.SandboxedTarget`). Every
kind holds sessions (`assay.targets.SessionTarget`): policies and attempts may drive any target.

Every default says "nothing to do": a kind overrides what it has.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from assay.calls.messages import Turn
from assay.spec.dataset import Item
from assay.targets._base import Target

S = TypeVar("S", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class TargetContext:
    """What a run hands the target it opens.

    Args:
        concurrency: the run's concurrency (sizes connection and thread pools).
        seed: the run's seed.
        spec_dir: the spec's folder: importable code, fixture files.
        run_id: the run's id.
        snapshot: what `prepare` returned when the run started (None when it returned nothing).
        store: the run's store, where a target keeps its attempts' artifacts.
        redact: patterns never stored (the spec's `redact:`).
    """

    concurrency: int
    seed: int
    spec_dir: str | None = None
    run_id: str | None = None
    snapshot: dict[str, Any] | None = None
    store: Any = None
    redact: list[str] | None = None


@dataclass(frozen=True, slots=True)
class Metered:
    """A target whose model calls Assay measures: one call per item and trial.

    Args:
        model: the model called (priced for budgets and estimates).
        max_tokens: the output tokens one call may take, when bounded.
        texts: the texts one item's call sends (`assay estimate` counts their tokens), the
            tools' definitions and the reply's schema among them.
        batch: the calls go through the provider's batch API (priced at its batch rates).
        extra_tokens: the input tokens one item's call takes beyond its texts', by its provider's
            documented rules (its images; the system prompt a provider adds for tools).
        bound_by: the field whose value `max_tokens` is (`max_completion_tokens`, which bounds
            a reasoning model's reasoning too), as the estimate says.
        documents: how many documents (PDFs) one item's call sends: no provider documents what
            one costs in tokens (a page is read as text and as an image), so the estimate says
            it leaves them out.
    """

    model: str
    max_tokens: int | None
    texts: Callable[[Item], list[str]]
    batch: bool = False
    extra_tokens: Callable[[Item], int] = lambda item: 0
    bound_by: str = "max_tokens"
    documents: Callable[[Item], int] = lambda item: 0


class TargetKind(ABC, Generic[S]):
    """One kind of target (the spec's `kind:`), registered in `assay.targets.KINDS`.

    Attributes:
        name: the spec model's `kind`.
        operational: the spec's fields that change how the target runs, not what it answers
            (endpoints, timeouts, retries): left out of the run's identity, so a resume may
            change them.
        makes_containers: its attempts make Docker containers (the run's end removes leftovers).
        live_attempts: its attempts stay alive while they are scored (`SandboxedTarget`).
    """

    name: ClassVar[str]
    operational: ClassVar[frozenset[str]] = frozenset()
    makes_containers: ClassVar[bool] = False
    live_attempts: ClassVar[bool] = False

    def problems(self, spec: S, spec_dir: Path, where: str) -> list[str]:
        """Why the spec cannot run, found before the dataset loads: one line per problem, each
        starting with the field (`<where>.function: ...`).

        Args:
            spec: the target spec.
            spec_dir: the spec's folder.
            where: the target's place in the spec (`target`, `targets.<cell>`).
        """
        return []

    def item_problems(self, spec: S, items: list[Item], where: str) -> list[str]:
        """Why some items cannot be asked (a template naming a field they lack), naming the
        item and the field; at most about 20 lines."""
        return []

    def metered(self, spec: S, spec_dir: Path | None = None) -> Metered | None:
        """The model calls Assay measures, or None: the target's spend is its own (uninstrumented).
        `spec_dir` resolves what the spec names relative to its folder (`module:function` tools)."""
        return None

    def conversation(self, spec: S, item: Item) -> list[Turn] | None:
        """The turns one item's call sends, when its spec writes them as a conversation
        (`messages:`; media paths resolved), for the report to show; None otherwise.

        Raises:
            ValueError: the item's conversation cannot be made (its field holds none).
        """
        return None

    def prepare(
        self, spec: S, items: list[Item], spec_dir: Path, stored: dict[str, Any] | None
    ) -> dict[str, Any] | None:
        """Preflight, before the run is recorded: returns the snapshot kept on the run (JSON), or
        None. A snapshot's `warnings` are shown, its `dropped_items` (`{item_id, reason}`) leave
        the plan.

        Args:
            spec: the target spec.
            items: the dataset's items.
            spec_dir: the spec's folder.
            stored: the snapshot a resumed run kept; reused, so the run goes on as it started.

        Raises:
            SpecError: naming each problem's field.
        """
        return None

    def key_problems(self, spec: S) -> list[str]:
        """Why the provider keys the target hands its agent do not work, each tried with one cheap
        request (`assay run --check-keys`), naming the variable; empty when they do or it has none."""
        return []

    def fixture_files(self, spec: S, items: list[Item], spec_dir: Path) -> list[Path]:
        """The local files the target hands its agent; their content belongs to the run's
        identity. Files missing or outside the spec's folder are left out (`prepare` reports them)."""
        return []

    def in_flight(self, spec: S, concurrency: int) -> int:
        """How many items a run keeps in flight against this target: the run's `concurrency`,
        unless the target gathers requests (batch mode holds a whole batch's worth)."""
        return concurrency

    def identity(self, spec: S, spec_dir: Path | None = None) -> dict[str, Any]:
        """The target's config that decides its results: the spec without `operational` fields
        (`spec_dir`, the spec's folder, for what a kind reads from the files the spec names)."""
        return spec.model_dump(mode="json", exclude=set(self.operational))

    @abstractmethod
    def open(self, spec: S, context: TargetContext) -> Target:
        """The live target a run calls."""
