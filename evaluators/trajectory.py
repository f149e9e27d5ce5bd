"""The `trajectory` scorer: did the agent call the expected tools, in the expected order?

The calls are those of the steps of `Sample.trajectory` (an agent's, a tool loop's), in step
order, else the model's calls as `tool_call` reads them. An expected step is a tool's name, or a call
(`{name, arguments, one_of, optional}`) whose arguments match as `tool_call`'s do (`argument_mode`).

    exact      the same calls, in the same order, no others
    in_order   the expected calls appear in order; other calls may come between (a subsequence)
    any_order  the same calls, in any order, no others
    subset     every expected call appears, in any order; other calls are allowed

The score is 1 or 0 (with the first thing missing or extra explained); with `partial_credit` it
is the share matched: for `in_order` and `subset` the expected calls found over the expected
count, for `exact` and `any_order` (where an extra call is a fault too) over the longer of the two.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ValidationError

from assay.evaluators._base import Sample, Score
from assay.evaluators._call_matching import (
    ExpectedCall,
    ExpectsCalls,
    FromField,
    GivenCall,
    MatchMode,
    UnreadableCalls,
    call_problem,
    first_problem,
    given_from_step,
    max_matching,
    model_calls,
    names,
)

TrajectoryMode = Literal["exact", "in_order", "any_order", "subset"]


def read_steps(value: Any) -> list[str | ExpectedCall]:
    """The expected steps a value holds: a list of tool names or calls. Raises ValueError naming
    the step that is neither."""
    if not isinstance(value, list):
        raise UnreadableCalls(f"expected steps: a list of tool names or calls, got {type(value).__name__}")
    steps: list[str | ExpectedCall] = []
    for position, step in enumerate(value, start=1):
        if (isinstance(step, str) and step) or isinstance(step, ExpectedCall):
            steps.append(step)
        elif isinstance(step, dict):
            try:
                steps.append(ExpectedCall.model_validate(step))
            except ValidationError as exc:
                raise UnreadableCalls(f"step {position}: {first_problem(exc)}") from None
        else:
            raise UnreadableCalls(
                f"step {position}: a tool's name or a call {{name, arguments}}, got {step!r}"
            )
    return steps


def trajectory_calls(sample: Sample) -> list[GivenCall]:
    """The calls made: every step's `tool_calls` in step order, else the model's calls as
    `tool_call` reads them (`Sample.tool_calls`, or an output that is a list of calls)."""
    if sample.trajectory is not None:
        return [
            given_from_step(call)
            for step in sample.trajectory
            if isinstance(step, dict)
            for call in step.get("tool_calls") or []
        ]
    return model_calls(sample)


class TrajectoryMatch(ExpectsCalls):
    """1 when the tools called are the expected sequence under `mode` (or the share matched).

    Args:
        expected: the expected steps: a list in the spec (tool names, or calls with arguments),
            or `{field: name}` to read them from each item's dataset field; by default the
            item's expected value.
        mode: `exact` (the same sequence), `in_order` (the expected steps in order, others
            between allowed), `any_order` (the same calls in any order) or `subset` (every
            expected step somewhere, others allowed).
        argument_mode: how an expected call's arguments compare (as `tool_call`'s `mode`:
            `exact`, `tolerant` or `subset`); a step given as a bare name matches any arguments.
        partial_credit: score the share of expected steps matched instead of 1 or 0.
    """

    kind: Literal["trajectory"] = "trajectory"
    expected: list[str | ExpectedCall] | FromField | None = None
    mode: TrajectoryMode = "in_order"
    argument_mode: MatchMode = "tolerant"
    partial_credit: bool = False

    def read_expected(self, value: Any) -> list[str | ExpectedCall]:
        return read_steps(value)

    def _problem(self, want: str | ExpectedCall, got: GivenCall) -> str | None:
        if isinstance(want, str):
            return None if got.name == want else f"function {got.name!r}, expected {want!r}"
        return call_problem(want, got, self.argument_mode, {})

    def score(self, sample: Sample) -> Score:
        want = self.expected_for(sample)
        got = trajectory_calls(sample)
        fits = [[self._problem(w, g) is None for g in got] for w in want]
        if self.mode in ("exact", "in_order"):
            matched = _longest_in_order(fits, len(want), len(got))
        else:
            matched = len(max_matching(len(want), len(got), lambda r, c: fits[r][c]))
        extras_count = self.mode in ("exact", "any_order")
        whole = max(len(want), len(got)) if extras_count else len(want)
        passed = matched == len(want) and (not extras_count or len(got) == len(want))
        value = 1.0 if passed else 0.0
        if self.partial_credit:
            value = matched / whole if whole else 1.0
        metadata = {"matched": matched, "expected": len(want), "calls": len(got)}
        if passed:
            return Score(value, metadata=metadata)
        return Score(value, explanation=self._explain(want, got, fits), metadata=metadata)

    def _explain(self, want: list[str | ExpectedCall], got: list[GivenCall], fits: list[list[bool]]) -> str:
        called = f"(the calls: {names(got)})"
        if self.mode == "exact":
            for position, (w, g) in enumerate(zip(want, got, strict=False), start=1):
                if (problem := self._problem(w, g)) is not None:
                    return f"call {position}: {problem} {called}"
            if len(got) > len(want):
                return f"{len(got) - len(want)} call(s) after the expected {len(want)}: {names(got[len(want) :])}"
            return f"expected {len(want)} calls, the model made {len(got)} {called}"
        if self.mode == "in_order":
            position = 0
            for number, row in enumerate(fits):
                found = next((c for c in range(position, len(got)) if row[c]), None)
                if found is None:
                    after = f" after call {position}" if position else ""
                    return f"expected step {number + 1} ({_brief(want[number])}) not called{after} {called}"
                position = found + 1
        matching = max_matching(len(want), len(got), lambda r, c: fits[r][c])
        missing = [_brief(want[r]) for r in range(len(want)) if r not in matching]
        if missing:
            return f"not called: {', '.join(missing)} {called}"
        extra = [got[c].name for c in range(len(got)) if c not in matching.values()]
        return f"calls beyond the expected: {', '.join(extra)} {called}"


def _brief(step: str | ExpectedCall) -> str:
    return step if isinstance(step, str) else step.brief()


def _longest_in_order(fits: list[list[bool]], rows: int, cols: int) -> int:
    """The most expected steps found in order (a longest common subsequence under `fits`)."""
    previous = [0] * (cols + 1)
    for r in range(rows):
        current = [0] * (cols + 1)
        for c in range(cols):
            current[c + 1] = previous[c] + 1 if fits[r][c] else max(previous[c + 1], current[c])
        previous = current
    return previous[cols]
