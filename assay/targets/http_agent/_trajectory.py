"""A harness run's trajectory: `GET /runs/{id}/trajectory` validated step by step, and what a run
records of it (step and tool-call counts, caller-reported cost and tokens, the steps kept)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from assay.outcomes import TrajectoryStatus
from assay.targets.http_agent._protocol import Step


@dataclass(slots=True)
class Trajectory:
    """A fetched trajectory after validation, reduced to what a run records."""

    status: TrajectoryStatus
    steps: list[Step] = field(default_factory=list)
    dropped_steps: int = 0
    problem: str | None = None
    raw: list[dict[str, Any]] = field(default_factory=list)
    """The valid steps as the harness sent them (fields the protocol does not name included):
    what scorers see and `trajectory.json` keeps."""

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
    """`valid`: an object whose `steps` is a list of valid steps. `partial`: some steps were
    invalid and dropped (the rest kept). `invalid`: not an object with a list of steps, or not one
    of a non-empty list of steps is valid."""
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
