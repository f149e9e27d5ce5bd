"""A harness run's trajectory: `GET /runs/{id}/trajectory` validated — an ATIF document against
the ATIF contract (`assay.targets.atif`), the protocol's `{"steps": [...]}` step by step — and what
a run records of it (step and tool-call counts, caller-reported cost and tokens, the steps kept)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from assay.outcomes import TrajectoryStatus
from assay.targets.atif import atif_steps, is_atif, read_atif
from assay.targets.http_agent._protocol import Step

REFETCHES = 2
REFETCH_AT_ONCE = 4


@dataclass(slots=True)
class Trajectory:
    """A fetched trajectory after validation, reduced to what a run records."""

    status: TrajectoryStatus
    steps: list[Step] = field(default_factory=list)
    dropped_steps: int = 0
    problem: str | None = None
    raw: list[dict[str, Any]] = field(default_factory=list)
    """The valid steps as the harness sent them (fields the protocol does not name included), or
    an ATIF document's as steps: what scorers see and `trajectory.json` keeps."""
    atif: dict[str, Any] | None = None
    """The ATIF document as validated, when the harness sent ATIF (kept as `atif.json`)."""
    refetches: int = 0
    """How many times a partial or unavailable trajectory was fetched again."""

    @property
    def kept(self) -> bool:
        """Whether there are steps worth keeping (a valid or partial trajectory)."""
        return self.status in (TrajectoryStatus.VALID, TrajectoryStatus.PARTIAL)

    @property
    def cost(self) -> float | None:
        costs = [s.cost_usd for s in self.steps if s.cost_usd is not None]
        return math.fsum(costs) if costs else None

    @property
    def cost_complete(self) -> bool:
        """Whether `cost` covers the whole run: every step arrived, valid, and priced."""
        return self.status is TrajectoryStatus.VALID and all(s.cost_usd is not None for s in self.steps)

    def tokens(self) -> dict[str, int | None]:
        def total(values: Iterable[int | None]) -> int | None:
            known = [v for v in values if v is not None]
            return sum(known) if known else None

        reported = [s.tokens for s in self.steps if s.tokens is not None]
        return {"input": total(t.input for t in reported), "output": total(t.output for t in reported)}

    @property
    def step_count(self) -> int | None:
        """Steps the agent took: every step sent, a dropped (invalid) one too; None without a list
        of steps to count."""
        return len(self.steps) + self.dropped_steps if self.kept else None

    @property
    def tool_call_count(self) -> int | None:
        """Tool calls of those steps; None unless every step was valid (a dropped step's calls are
        unknown, and an undercount would read as a fact)."""
        return sum(len(s.tool_calls) for s in self.steps) if self.status is TrajectoryStatus.VALID else None

    def summary(self) -> dict[str, Any]:
        summary: dict[str, Any] = {
            "trajectory_status": self.status.value,
            "steps": len(self.steps),
            "tool_calls": sum(len(s.tool_calls) for s in self.steps),
            "cost_complete": self.cost_complete,
        }
        if self.dropped_steps:
            summary["trajectory_dropped_steps"] = self.dropped_steps
        if self.problem:
            summary["trajectory_problem"] = self.problem
        if self.atif is not None:
            summary["trajectory_format"] = self.atif["schema_version"]
        if self.refetches:
            summary["trajectory_refetches"] = self.refetches
        return summary

    def spend(self, harness_id: str, status: str) -> dict[str, Any]:
        """What a failed run reports it spent (for `TargetFailure.usage`): paid work may precede a
        failure, so the figures travel with it."""
        return {
            "harness_run_id": harness_id,
            "status": status,
            "cost_usd": self.cost,
            "tokens": self.tokens(),
            **self.summary(),
        }

    def document(self, harness_id: str) -> dict[str, Any]:
        """What `trajectory.json` holds."""
        return {
            "harness_run_id": harness_id,
            "status": self.status,
            "dropped_steps": self.dropped_steps,
            "problem": self.problem,
            "steps": self.raw,
        }


def validate_trajectory(doc: Any) -> Trajectory:
    """An ATIF document (its `schema_version` says so): `valid` or `partial` (marked so) when it
    keeps the ATIF contract, else `invalid`. The protocol's document: `valid` when `steps` is a
    list of valid steps; `partial` when some steps were invalid and dropped (the rest kept);
    `invalid` when it is not an object with a list of steps, or not one of a non-empty list of
    steps is valid."""
    if is_atif(doc):
        return _from_atif(doc)
    steps = doc.get("steps") if isinstance(doc, dict) else None
    if not isinstance(steps, list):
        return Trajectory(TrajectoryStatus.INVALID, problem="expected an object with a list `steps`")
    kept: list[Step] = []
    raws: list[dict[str, Any]] = []
    first: str | None = None
    for index, raw in enumerate(steps):
        try:
            kept.append(Step.model_validate(raw))
            raws.append(raw)
        except ValidationError as exc:
            if first is None:
                error = exc.errors(include_url=False)[0]
                where = ".".join(str(p) for p in error["loc"]) or "step"
                first = f"steps.{index}: {where}: {error['msg']}"
    dropped = len(steps) - len(kept)
    if not dropped:
        return Trajectory(TrajectoryStatus.VALID, kept, raw=raws)
    if not kept:
        return Trajectory(TrajectoryStatus.INVALID, dropped_steps=dropped, problem=first)
    return Trajectory(TrajectoryStatus.PARTIAL, kept, dropped_steps=dropped, problem=first, raw=raws)


def _from_atif(doc: dict[str, Any]) -> Trajectory:
    atif, status, problem = read_atif(doc)
    if atif is None:
        return Trajectory(status, problem=problem)
    raws = atif_steps(atif)
    steps = [Step.model_validate(raw) for raw in raws]  # built from a valid document: valid steps
    return Trajectory(status, steps, problem=problem, raw=raws, atif=atif.document())


async def refetched(
    first: Trajectory, fetch: Callable[[], Awaitable[Trajectory]], slots: asyncio.Semaphore, wait: float
) -> Trajectory:
    """As evalkit does before scoring: a `partial` or `unavailable` trajectory fetched again, at
    most `REFETCHES` more times, `wait` seconds apart, holding one of `slots` (a few at a time),
    until it is `valid`. A later fetch replaces an earlier one unless it has less (nothing after
    a partial).

    Args:
        first: the trajectory first fetched.
        fetch: fetches it again.
        slots: the target's re-fetches at once (`REFETCH_AT_ONCE`).
        wait: seconds before each re-fetch (the target's `poll_interval`).
    """
    trajectory, refetches = first, 0
    while (
        trajectory.status in (TrajectoryStatus.PARTIAL, TrajectoryStatus.UNAVAILABLE)
        and refetches < REFETCHES
    ):
        async with slots:
            await asyncio.sleep(wait)
            again = await fetch()
        refetches += 1
        if (
            again.status is not TrajectoryStatus.UNAVAILABLE
            or trajectory.status is TrajectoryStatus.UNAVAILABLE
        ):
            trajectory = again
    trajectory.refetches = refetches
    return trajectory
