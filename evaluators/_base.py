"""The contract every scorer follows.

A scorer is a pydantic model: its fields are the parameters users write in the spec, and the
model *is* the scorer (`score()` does the work). `kind` discriminates the union in the spec.
"""

from __future__ import annotations

import inspect
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field

from assay.calls.messages import ToolCall
from assay.evaluators._imports import resolve_callable


@dataclass(frozen=True, slots=True)
class Sample:
    """What a scorer sees of one item x trial.

    Args:
        output: what the target returned (a string for model targets, any JSON value otherwise).
        input: the item's input field.
        expected: the item's expected field, or None.
        annotations: the item's annotations (a dict, possibly empty).
        fields: the whole dataset row.
        trajectory: an agent's steps (role, content, tool calls…), when the target recorded them.
        tool_calls: the model's function calls, when its answer is calls (a chat target with
            `tools`): structured, in the order made; None when it answered in words.
        workspace: the exported workspace folder of a sandboxed attempt.
        sandbox: the attempt's live sandbox (`exec(argv)`), while scorers run; None otherwise.
        item_id: the item's id (a remote evaluator's `case.id`).
        trial: the item's trial.
    """

    output: Any
    input: Any
    expected: Any = None
    annotations: dict[str, Any] = field(default_factory=dict)
    fields: dict[str, Any] = field(default_factory=dict)
    trajectory: list[dict[str, Any]] | None = None
    tool_calls: list[ToolCall] | None = None
    workspace: Path | None = None
    sandbox: Any = None
    item_id: str | None = None
    trial: int = 0


@dataclass(frozen=True, slots=True)
class RunContext:
    """The run a scorer is scoring for, for scorers that make things of their own (a fresh
    sandbox carries the run's id as a label; paths are relative to the spec's folder).

    Args:
        run_id: the run's id.
        spec_dir: the spec's folder.
        store: the run's store (a batched judge records its batches there); None outside a run.
    """

    run_id: str = ""
    spec_dir: str = "."
    store: Any = None


run_context: ContextVar[RunContext] = ContextVar("assay_run_context", default=RunContext())  # noqa: B039 - frozen


@dataclass(frozen=True, slots=True)
class Score:
    """A scorer's full answer: a value in [0, 1], and optionally why.

    Args:
        value: the score.
        explanation: why.
        metadata: anything else worth keeping.
        name: set when a scorer returns several named scores (a remote evaluator): each is stored
            as its own row, `<scorer>.<name>`.
        label: a remote evaluator's label for the score (`error` marks an evaluator that failed).
        gauge: with a `name`: the value is a measurement in its own unit, not a score (a remote
            evaluator's gauge), stored as a gauge row `gauge.<scorer>.<name>`.
        judge_variance: a judge asked K times (`judge_samples`): the K scores' sample variance.
        judge_samples: that K.
    """

    value: float
    explanation: str | None = None
    metadata: dict[str, Any] | None = None
    name: str | None = None
    label: str | None = None
    gauge: bool = False
    judge_variance: float | None = None
    judge_samples: int | None = None


class Scorer(BaseModel):
    """Base of every scorer spec.

    Args:
        kind: which scorer (the discriminator in the spec).
        name: the column name of its scores; defaults to `kind`.
        applies: optional `module:function` called as `applies(output, input, annotations)`;
            a falsy answer makes the scorer's outcome `skipped` for that item.
        gold_check: before anything runs, the scorer must score the dataset's first expected
            answer (as the output) as passing; if it does not, the eval is unavailable.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    version: ClassVar[str] = "1"
    # Model-graded scorers set this False; compare uses it for default thresholds.
    deterministic: ClassVar[bool] = True
    # Parameters that change how a scorer runs, not what it decides (endpoints, timeouts): left
    # out of a run's identity, so a resume may change them.
    operational: ClassVar[frozenset[str]] = frozenset({"gold_check"})
    # Scorers that import the spec's own code (`module:function`) set this True.
    imports_code: ClassVar[bool] = False

    kind: str
    name: str = ""
    applies: str | None = Field(default=None, pattern=r"^[\w.]+:[\w.]+$")
    gold_check: bool = False

    def model_post_init(self, context: Any, /) -> None:
        if not self.name:
            object.__setattr__(self, "name", self.kind)

    @property
    def makes_containers(self) -> bool:
        """Whether scoring starts Docker containers of its own (a run's end removes what is left)."""
        return False

    def in_flight(self, concurrency: int) -> int:
        """How many outputs a run keeps being scored at once for this scorer: `concurrency`,
        unless it gathers them (a batched judge waits for a batch's worth)."""
        return concurrency

    def is_async(self, spec_dir: str | None = None) -> bool:
        """Whether scoring waits on I/O (a coroutine). Sync scorers run one after another on the
        event loop, since concurrency buys them nothing; async ones run `scorer_concurrency` at once."""
        return inspect.iscoroutinefunction(type(self).score)

    def unresolved(self, spec_dir: str | None = None) -> list[str]:
        """Why the `module:function` references this scorer makes cannot be used: one line per
        reference that does not import, naming its field; empty when all do. A run checks this
        before it writes anything.

        Args:
            spec_dir: the spec's folder, made importable first.
        """
        if self.applies is None:
            return []
        try:
            resolve_callable(self.applies, spec_dir)
        except (ValueError, TypeError) as exc:
            return [f"applies: {exc}"]
        return []

    def template_problems(self, names: set[str]) -> list[str]:
        """Why this scorer's templates cannot fill from the dataset: each placeholder naming
        none of `names` (every field some item has), naming its field; a run checks this before
        it writes anything (a spec error)."""
        return []

    def item_problems(self, items: list[Any], spec_dir: Path, where: str) -> list[str]:
        """Why some items cannot be scored (a template naming a field they lack, a file they
        need missing), each naming the item and `where` (`scorers.<n>`); a dataset error."""
        return []

    def identity(self) -> dict[str, Any]:
        """The parameters that decide its scores, as the run's identity holds them: the spec
        without its `operational` fields."""
        return self.model_dump(mode="json", exclude=set(type(self).operational))

    def fixture_files(self, items: list[Any], spec_dir: Path) -> list[Path]:
        """The local files this scorer hands its sandboxes; their content is part of the run's
        identity, as a target's fixtures are."""
        return []

    def score(self, sample: Sample) -> float | bool | Score:  # may also be async
        raise NotImplementedError
