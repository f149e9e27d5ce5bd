"""Matching a model's tool calls against expected ones: what the `tool_call` and `trajectory`
scorers share.

An expected call names a function and its arguments; each argument has one or more acceptable
values and may be marked optional. Values compare in one of three modes, from strict to loose:

    exact     the same JSON value and type (1 is not 1.0; "Paris" is not "paris")
    tolerant  BFCL's AST checker's comparison: numbers by value (1 == 1.0, never a bool),
              strings normalised (case, whitespace and `,./-_*^` ignored, ' read as "), lists
              element by element, objects key by key; a parameter the model left out takes its
              default from the tool's JSON schema, and one it spelled out at its default is not
              an unexpected argument
    subset    as tolerant, and arguments the model gave beyond the expected ones are ignored

Every check answers a problem in words (which argument, got what, expected what) or None.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from assay.calls.messages import ToolCall
from assay.evaluators._base import Sample, Scorer

MatchMode = Literal["exact", "tolerant", "subset"]

# BFCL's standardize_string drops these and spaces, lowercases, and reads ' as ": "April 1, 2024"
# and "april 1 2024" are one answer.
_IGNORED_IN_STRINGS = re.compile(r"[\s,./\-_*^]")
_MISSING = object()
_MAX_PROBLEMS = 20


class UnreadableCalls(ValueError):
    """Expected calls (or steps) that are none of the shapes the scorers read; the message says
    where. A ValueError, so that a spec's validator reports it as the field's problem."""


class ExpectedCall(BaseModel):
    """One call a model should make."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1)
    """The function's name."""
    arguments: dict[str, Any] = Field(default_factory=dict)
    """The expected value of each argument."""
    one_of: dict[str, list[Any]] = Field(default_factory=dict)
    """Arguments with several acceptable values: each lists them (BFCL's possible answers)."""
    optional: list[str] = Field(default_factory=list)
    """Arguments the model may leave out; when it gives one, its value must still be acceptable."""

    @model_validator(mode="after")
    def _consistent(self) -> ExpectedCall:
        if both := sorted(self.arguments.keys() & self.one_of.keys()):
            raise ValueError(f"argument {both[0]!r} is in both arguments and one_of: give it in one")
        for param, values in self.one_of.items():
            if not values and param not in self.optional:
                raise ValueError(f"one_of.{param} lists no acceptable value")
        for param in self.optional:
            if param not in self.arguments and param not in self.one_of:
                raise ValueError(f"optional names {param!r}, which is neither in arguments nor one_of")
        return self

    def acceptable(self, param: str) -> list[Any]:
        """The values `param` may take."""
        return self.one_of[param] if param in self.one_of else [self.arguments[param]]

    def params(self) -> list[str]:
        """Every argument it names, arguments first."""
        return [*self.arguments, *self.one_of]

    def brief(self) -> str:
        """`get_weather(city='Paris', unit=…)`, for an explanation."""
        shown = [f"{p}={_show(v)}" for p, v in self.arguments.items()]
        shown += [f"{p}=one of {', '.join(_show(v) for v in vs)}" for p, vs in self.one_of.items()]
        return _cut(f"{self.name}({', '.join(shown)})", 160)


class FromField(BaseModel):
    """Expected calls read from a dataset field: `expected: {field: expected_calls}`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: str = Field(min_length=1)
    """The dataset field that holds each item's expected calls."""


class ExpectsCalls(Scorer):
    """Base of the scorers that compare calls with each item's expected ones: where they come
    from (the spec's `expected` list, a dataset field, or the item's expected value) and the
    checks that every item's can be read before a run starts. A subclass declares `expected`
    and reads a value with `read_expected` (raising ValueError saying where it is unreadable)."""

    expected: Any = None

    def read_expected(self, value: Any) -> Any:
        raise NotImplementedError

    def expected_for(self, sample: Sample) -> Any:
        """The sample's expected calls, read; ValueError when there are none or they are unreadable."""
        return self._expected(sample.fields, sample.expected)

    def _expected(self, fields: dict[str, Any], expected: Any) -> Any:
        if isinstance(self.expected, list):
            return self.read_expected(self.expected)
        if isinstance(self.expected, FromField):
            if self.expected.field not in fields:
                raise ValueError(f"the item has no field {self.expected.field!r}")
            expected = fields[self.expected.field]
        if expected is None:
            raise ValueError(f"{self.kind} needs the expected calls, and this item has none")
        return self.read_expected(expected)

    def template_problems(self, names: set[str]) -> list[str]:
        if isinstance(self.expected, FromField) and self.expected.field not in names:
            return [f"expected.field: {self.expected.field!r} names no field of the dataset"]
        return []

    def item_problems(self, items: list[Any], spec_dir: Path, where: str) -> list[str]:
        """Each item whose expected calls cannot be read (at most about 20 lines)."""
        if isinstance(self.expected, list):
            return []  # read when the spec loaded
        problems: list[str] = []
        for item in items:
            try:
                self._expected(item.fields, item.expected)
            except ValueError as exc:
                problems.append(f"item {item.item_index} (id {item.item_id!r}): {where}.expected: {exc}")
            if len(problems) >= _MAX_PROBLEMS:
                break
        return problems


@dataclass(frozen=True, slots=True)
class GivenCall:
    """A call the model made, as the matcher reads it: its arguments an object, or `problem`
    saying why they are not one (the model wrote something that is not JSON)."""

    name: str
    arguments: dict[str, Any]
    problem: str | None = None

    def brief(self) -> str:
        if self.problem is not None:
            return f"{self.name}(…)"
        return _cut(f"{self.name}({', '.join(f'{p}={_show(v)}' for p, v in self.arguments.items())})", 160)


@dataclass(frozen=True, slots=True)
class ToolSchema:
    """What a tool's JSON schema tells the matcher: each parameter's default."""

    defaults: dict[str, Any]


Answer = tuple[ExpectedCall, ...]


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _show(value: Any) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        text = repr(value)
    return _cut(text, 80)


def given_call(call: ToolCall) -> GivenCall:
    """A model's call, read for matching: no arguments are `{}`; arguments that are not a JSON
    object (text the model wrote that is not JSON, a list) are a problem, not a guess."""
    return _given(call.name, call.arguments, parse_text=False)


def given_from_step(call: Any) -> GivenCall:
    """A call as a trajectory step or a stored output holds it: `{name, arguments}` (an agent's
    steps, ATIF's converted ones) or OpenAI's `{function: {name, arguments}}`, whose arguments may
    still be the JSON text the provider sent."""
    if not isinstance(call, dict):
        return GivenCall(name="?", arguments={}, problem=f"the call is not an object: {_show(call)}")
    nested = call.get("function")
    function: dict[str, Any] = nested if isinstance(nested, dict) else call
    name = function.get("name")
    if not isinstance(name, str) or not name:
        return GivenCall(name="?", arguments={}, problem=f"the call names no function: {_show(call)}")
    return _given(name, function.get("arguments"), parse_text=True)


def model_calls(sample: Sample) -> list[GivenCall]:
    """The calls the model made: `Sample.tool_calls`, else an output that is a list of calls,
    else none (it answered in words)."""
    if sample.tool_calls is not None:
        return [given_call(call) for call in sample.tool_calls]
    output = sample.output
    if isinstance(output, list) and output and all(_looks_like_call(v) for v in output):
        return [given_from_step(call) for call in output]
    return []


def _looks_like_call(value: Any) -> bool:
    return isinstance(value, dict) and (
        isinstance(value.get("name"), str) or isinstance(value.get("function"), dict)
    )


def _given(name: str, arguments: Any, *, parse_text: bool) -> GivenCall:
    if arguments is None:
        return GivenCall(name, {})
    if isinstance(arguments, str):
        if parse_text:
            try:
                return _given(name, json.loads(arguments), parse_text=False)
            except ValueError:
                pass
        return GivenCall(name, {}, problem=f"its arguments are not JSON: {_show(arguments)}")
    if not isinstance(arguments, dict):
        return GivenCall(name, {}, problem=f"its arguments are not an object: {_show(arguments)}")
    return GivenCall(name, arguments)


def read_tools(tools: Sequence[dict[str, Any]]) -> dict[str, ToolSchema]:
    """Tool definitions by name: OpenAI's `{type: function, function: {name, parameters}}`, a bare
    `{name, parameters}` (BFCL's) or Anthropic's `{name, input_schema}`. Raises ValueError naming
    the definition that is none of these."""
    schemas: dict[str, ToolSchema] = {}
    for position, tool in enumerate(tools):
        definition = tool.get("function", tool) if isinstance(tool, dict) else None
        name = definition.get("name") if isinstance(definition, dict) else None
        if not isinstance(definition, dict) or not isinstance(name, str) or not name:
            raise ValueError(f"tools.{position}: a tool definition needs a `name` (or `function.name`)")
        parameters = definition.get("parameters", definition.get("input_schema", {}))
        properties = parameters.get("properties", {}) if isinstance(parameters, dict) else None
        if not isinstance(properties, dict) or not all(isinstance(p, dict) for p in properties.values()):
            raise ValueError(
                f"tools.{position} ({name}): parameters.properties must map names to JSON schemas"
            )
        schemas[name] = ToolSchema({p: s["default"] for p, s in properties.items() if "default" in s})
    return schemas


def parse_answers(value: Any, answer_format: Literal["calls", "bfcl"]) -> list[Answer]:
    """The acceptable answers an expected value holds, each a list of calls.

    A call (an object) is one answer of one call; a list of calls is one answer of those calls
    (parallel ones); a list of lists is several acceptable answers; `[]` expects no call at all.
    In `bfcl` format a call is BFCL's `{function: {param: [acceptable values]}}`, where `""`
    among the values marks the parameter optional. Raises ValueError saying where the value is
    not one of these.
    """
    if isinstance(value, dict):
        value = [value]
    if not isinstance(value, list):
        raise UnreadableCalls(f"expected calls: a call or a list of calls, got {_show(value)}")
    if value and all(isinstance(v, list) for v in value):
        alternatives = value
    elif all(isinstance(v, dict) for v in value):
        alternatives = [value]
    else:
        raise ValueError(
            "expected calls: a list holds either calls (one answer) or lists of calls (several "
            f"acceptable answers), not both: {_show(value)}"
        )
    answers = []
    for number, alternative in enumerate(alternatives, start=1):
        where = f"answer {number}, " if len(alternatives) > 1 else ""
        calls = []
        for position, call in enumerate(alternative, start=1):
            try:
                calls.append(
                    _bfcl_call(call) if answer_format == "bfcl" else ExpectedCall.model_validate(call)
                )
            except ValidationError as exc:
                raise ValueError(f"{where}call {position}: {first_problem(exc)}") from None
            except ValueError as exc:
                raise ValueError(f"{where}call {position}: {exc}") from None
        answers.append(tuple(calls))
    return answers


def first_problem(exc: ValidationError) -> str:
    """A validation error's first problem, as `where: what` (pydantic's "Value error, " cut)."""
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in error["loc"])
    message = str(error["msg"]).removeprefix("Value error, ")
    return f"{where}: {message}" if where else message


def _bfcl_call(call: Any) -> ExpectedCall:
    if not isinstance(call, dict) or len(call) != 1:
        raise UnreadableCalls(f"a BFCL call is one function name mapped to its parameters, got {_show(call)}")
    [(name, params)] = call.items()
    if not isinstance(params, dict):
        raise UnreadableCalls(f"{name}: its parameters must be an object, got {_show(params)}")
    one_of: dict[str, list[Any]] = {}
    optional = []
    for param, values in params.items():
        if not isinstance(values, list):
            raise UnreadableCalls(
                f"{name}.{param}: BFCL lists a parameter's acceptable values, got {_show(values)}"
            )
        if "" in values:
            optional.append(param)
        one_of[param] = [v for v in values if v != ""]
    return ExpectedCall(name=name, one_of=one_of, optional=optional)


def standardized(text: str) -> str:
    """A string as the tolerant modes compare it."""
    return _IGNORED_IN_STRINGS.sub("", text).casefold().replace("'", '"')


def values_equal(got: Any, want: Any, mode: MatchMode) -> bool:
    """Whether an argument's value is the expected one under `mode`."""
    if mode == "exact":
        return type(got) is type(want) and (
            _each_equal(got, want, mode) if isinstance(got, (list, dict)) else bool(got == want)
        )
    if isinstance(got, bool) or isinstance(want, bool):
        return type(got) is type(want) and got == want
    if isinstance(got, (int, float)) and isinstance(want, (int, float)):
        return got == want
    if isinstance(got, str) and isinstance(want, str):
        return standardized(got) == standardized(want)
    if isinstance(got, (list, dict)) and type(got) is type(want):
        return _each_equal(got, want, mode)
    return type(got) is type(want) and bool(got == want)


def _each_equal(got: list[Any] | dict[str, Any], want: list[Any] | dict[str, Any], mode: MatchMode) -> bool:
    if isinstance(got, list) and isinstance(want, list):
        return len(got) == len(want) and all(values_equal(g, w, mode) for g, w in zip(got, want, strict=True))
    if isinstance(got, dict) and isinstance(want, dict):
        return got.keys() == want.keys() and all(values_equal(got[k], want[k], mode) for k in got)
    return False


def call_problem(
    expected: ExpectedCall, given: GivenCall, mode: MatchMode, tools: dict[str, ToolSchema]
) -> str | None:
    """Why `given` is not the `expected` call (its function, then its arguments in the expected
    order, then any it gave beyond them), or None when it is."""
    if given.name != expected.name:
        return f"function {given.name!r}, expected {expected.name!r}"
    if given.problem is not None:
        return given.problem
    defaults = tools[expected.name].defaults if mode != "exact" and expected.name in tools else {}
    for param in expected.params():
        if param not in given.arguments and param in expected.optional:
            continue  # the expected call says it may be left out, whatever its default
        value = given.arguments.get(param, defaults.get(param, _MISSING))
        if value is _MISSING:
            return f"argument {param!r} missing, expected {_acceptable(expected, param)}"
        acceptable = expected.acceptable(param)
        if any(values_equal(value, want, mode) for want in acceptable):
            continue
        if param not in given.arguments:
            return f"argument {param!r} left out (its default is {_show(value)}), expected {_acceptable(expected, param)}"
        if not acceptable:
            return f"argument {param!r}: got {_show(value)}, expected it left out"
        return f"argument {param!r}: got {_show(value)}, expected {_acceptable(expected, param)}"
    if mode == "subset":
        return None
    named = set(expected.params())
    for param, value in given.arguments.items():
        if param in named or (param in defaults and values_equal(value, defaults[param], mode)):
            continue
        return f"unexpected argument {param!r} (= {_show(value)})"
    return None


def _acceptable(expected: ExpectedCall, param: str) -> str:
    values = expected.acceptable(param)
    if not values:
        return "it left out"
    if len(values) == 1:
        return _show(values[0])
    return "one of " + ", ".join(_show(v) for v in values)


def max_matching(rows: int, cols: int, fits: Callable[[int, int], bool]) -> dict[int, int]:
    """A maximum matching of rows to columns where `fits(row, col)` (Kuhn's augmenting paths;
    BFCL's parallel checker takes the first fit greedily, which can miss a matching that exists).
    Returns row -> column for the matched rows."""
    fit = [[c for c in range(cols) if fits(r, c)] for r in range(rows)]
    owner: dict[int, int] = {}  # column -> row

    def augment(row: int, seen: set[int]) -> bool:
        for col in fit[row]:
            if col in seen:
                continue
            seen.add(col)
            if col not in owner or augment(owner[col], seen):
                owner[col] = row
                return True
        return False

    for row in range(rows):
        augment(row, set())
    return {row: col for col, row in owner.items()}


def names(calls: Sequence[GivenCall]) -> str:
    """The functions called, in order, for an explanation."""
    return ", ".join(call.name for call in calls) if calls else "none"
