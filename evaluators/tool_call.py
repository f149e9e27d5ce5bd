"""The `tool_call` scorer: did the model call the right function with the right arguments?

The model's calls are `Sample.tool_calls` (a chat target with `tools` whose answer is calls);
when that is None, an output that is a list of calls (`{name, arguments}` objects, as a python
target or a stored output gives them) is read as the calls, and any other output is an answer in
words, which makes no call. The expected calls come from the spec (`expected: [...]`), a dataset
field (`expected: {field: expected_calls}`) or, by default, the item's expected value.

BFCL's categories, as the expected value writes them:

    simple             one call                          [{name: get_weather, arguments: {city: Paris}}]
    multiple           the right one of several tools    the same; a call to another function fails
    parallel           several calls, in any order       [{name: a, ...}, {name: b, ...}]
    parallel-multiple  several calls of several tools    the same
    irrelevance        no call: a reply in words passes  []

Several acceptable answers are a list of lists of calls; several acceptable values of one
argument are `one_of: {city: [Paris, "Paris, France"]}`. The score is 1 or 0; a 0 explains the
first mismatch (which call, which argument, got what, expected what).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import model_validator

from assay.evaluators._base import Sample, Score
from assay.evaluators._call_matching import (
    Answer,
    ExpectsCalls,
    FromField,
    GivenCall,
    MatchMode,
    call_problem,
    max_matching,
    model_calls,
    names,
    parse_answers,
    read_tools,
)


class ToolCallMatch(ExpectsCalls):
    """1 when the model's tool calls are one of the expected answers, else 0 with the first mismatch.

    Args:
        expected: the expected calls: a list in the spec (a list of calls, a list of lists of
            calls for several acceptable answers, `[]` for no call), or `{field: name}` to read
            them from each item's dataset field; by default the item's expected value.
        format: how the expected calls are written: `calls` (`{name, arguments, one_of,
            optional}`) or `bfcl` (BFCL's possible answers, `{function: {param: [values]}}`, `""`
            among the values marking the parameter optional).
        mode: how arguments compare: `exact` (same JSON values and types), `tolerant` (BFCL's:
            numbers by value, strings normalised, schema defaults filled in) or `subset`
            (tolerant, and arguments beyond the expected ones ignored).
        ordered: parallel calls must come in the expected order (by default any order matches).
        tools: the tools' JSON-schema definitions (OpenAI's, Anthropic's or BFCL's shape); in the
            tolerant modes a parameter's `default` stands in for an argument the model left out.
    """

    kind: Literal["tool_call"] = "tool_call"
    expected: list[Any] | FromField | None = None
    format: Literal["calls", "bfcl"] = "calls"
    mode: MatchMode = "tolerant"
    ordered: bool = False
    tools: list[dict[str, Any]] | None = None

    @model_validator(mode="after")
    def _readable(self) -> ToolCallMatch:
        if isinstance(self.expected, list):
            try:
                parse_answers(self.expected, self.format)
            except ValueError as exc:
                raise ValueError(f"expected: {exc}") from None
        read_tools(self.tools or [])
        return self

    def read_expected(self, value: Any) -> list[Answer]:
        return parse_answers(value, self.format)

    def score(self, sample: Sample) -> Score:
        answers = self.expected_for(sample)
        given = model_calls(sample)
        tools = read_tools(self.tools or [])
        failures = []
        for number, answer in enumerate(answers, start=1):
            problem, matched = self._problem(answer, given, tools)
            if problem is None:
                return Score(1.0, metadata={"answer": number} if len(answers) > 1 else None)
            same_functions = sorted(c.name for c in answer) == sorted(c.name for c in given)
            failures.append((matched, same_functions, len(answer) == len(given), -number, problem))
        # The nearest answer explains best: the most calls matched, then the same functions
        # called, then the same count of calls, then the first.
        *_, negative, problem = max(failures, key=lambda f: f[:4])
        number = -negative
        if len(answers) > 1:
            problem = f"answer {number} of {len(answers)} (the nearest): {problem}"
        return Score(0.0, explanation=problem)

    def _problem(
        self, answer: Answer, given: list[GivenCall], tools: dict[str, Any]
    ) -> tuple[str | None, int]:
        """Why `given` is not `answer` (None when it is), and how many calls matched."""
        if not answer:
            if given:
                return f"expected no call; the model called {', '.join(c.brief() for c in given)}", 0
            return None, 0
        if not given:
            return f"expected {_calls(answer)}; the model made no call (it answered in words)", 0
        if len(given) != len(answer):
            plural = "s" if len(answer) > 1 else ""
            counts = f"expected {len(answer)} call{plural} ({_calls(answer)}), the model made {len(given)}"
            return f"{counts} ({names(given)})", 0
        if self.ordered:
            for position, (want, got) in enumerate(zip(answer, given, strict=True), start=1):
                if (problem := call_problem(want, got, self.mode, tools)) is not None:
                    return f"call {position} ({got.name}): {problem}", position - 1
            return None, len(answer)
        fits = [[call_problem(w, g, self.mode, tools) for g in given] for w in answer]
        matching = max_matching(len(answer), len(given), lambda r, c: fits[r][c] is None)
        if len(matching) == len(answer):
            return None, len(answer)
        missed = next(r for r in range(len(answer)) if r not in matching)
        free = [c for c in range(len(given)) if c not in matching.values()]
        # The closest call left over: one of the same function, if the model made one.
        closest = next((c for c in free if given[c].name == answer[missed].name), free[0])
        where = (
            ""
            if len(answer) == 1
            else f"expected call {missed + 1} ({answer[missed].name}) matches none left; closest, "
        )
        return f"{where}call {closest + 1} ({given[closest].name}): {fits[missed][closest]}", len(matching)


def _calls(answer: Answer) -> str:
    return ", ".join(call.brief() for call in answer)
