"""The `user_code` scorer: a Python function the spec names as `module:function`."""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from pydantic import field_validator

from assay.evaluators._base import Sample, Score, Scorer
from assay.evaluators._imports import make_importable, resolve_callable

# The Sample fields a user function may ask for, by parameter name.
_ARGUMENTS = (
    "output",
    "input",
    "expected",
    "annotations",
    "fields",
    "trajectory",
    "tool_calls",
    "workspace",
    "sandbox",
)
_REF = re.compile(r"^[\w.]+:[\w.]+$")
_DICT_KEYS = {"score", "explanation", "metadata"}


@dataclass(frozen=True, slots=True)
class _Call:
    """How to call one user function, worked out once from its signature."""

    fn: Callable[..., Any]
    pass_sample: bool
    positional: tuple[str, ...]
    keywords: tuple[str, ...]


@functools.cache
def _load(ref: str) -> _Call:
    # Cached per ref: imports and signatures are the same for every item.
    fn = resolve_callable(ref)
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError) as exc:
        raise ValueError(f"user_code function {ref!r} has no inspectable signature: {exc}") from None
    positional_kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if len(params) == 1 and params[0].name == "sample" and params[0].kind in positional_kinds:
        return _Call(fn, pass_sample=True, positional=(), keywords=())
    positional: list[str] = []
    keywords: list[str] = []
    takes_kwargs = False
    for param in params:
        if param.kind is inspect.Parameter.VAR_KEYWORD:
            takes_kwargs = True
        elif param.kind is inspect.Parameter.VAR_POSITIONAL:
            continue
        elif param.name in _ARGUMENTS:
            (positional if param.kind is inspect.Parameter.POSITIONAL_ONLY else keywords).append(param.name)
        elif param.default is inspect.Parameter.empty:
            raise ValueError(
                f"user_code function {ref!r} requires parameter {param.name!r}; "
                f"a scorer function may take only {', '.join(_ARGUMENTS)} (or a single `sample`)"
            )
    if takes_kwargs:
        keywords += [name for name in _ARGUMENTS if name not in positional and name not in keywords]
    return _Call(fn, pass_sample=False, positional=tuple(positional), keywords=tuple(keywords))


def _to_score(ref: str, result: Any) -> Any:
    """A dict answer as a `Score`; anything else as is, for `evaluate` to check."""
    if not isinstance(result, dict):
        return result
    if "score" not in result:
        raise ValueError(f"user_code function {ref!r} returned a dict without a 'score' key")
    if unknown := set(result) - _DICT_KEYS:
        raise ValueError(
            f"user_code function {ref!r} returned unknown keys {sorted(unknown)}; "
            f"allowed: {sorted(_DICT_KEYS)}"
        )
    return Score(result["score"], result.get("explanation"), result.get("metadata"))


class UserCode(Scorer):
    """Scores with a Python function of yours.

    The function is imported on first use (from the spec's folder, which `evaluate` puts on
    `sys.path`) and called with the keyword arguments its signature names among output, input,
    expected, annotations, fields, trajectory, tool_calls (a chat model's calls when they are its
    answer: `Sample.tool_calls`), workspace and sandbox; all of them if it takes `**kwargs`; or the whole `Sample` if
    its only parameter is `sample`. It may be async. It returns a bool, a number, a `Score`, or a
    dict with `score` and optionally `explanation` and `metadata`.

    Args:
        function: `module:function`, e.g. `my_scorers:is_polite`.
    """

    kind: Literal["user_code"] = "user_code"
    function: str

    imports_code: ClassVar[bool] = True

    @field_validator("function")
    @classmethod
    def _is_reference(cls, function: str) -> str:
        if not _REF.match(function):
            raise ValueError(f"function must be of the form 'module:function', got {function!r}")
        return function

    def unresolved(self, spec_dir: str | None = None) -> list[str]:
        problems = super().unresolved(spec_dir)
        make_importable(spec_dir)
        try:
            _load(self.function)  # imports it and checks its parameters
        except (ValueError, TypeError) as exc:
            problems.append(f"function: {exc}")
        return problems

    def is_async(self, spec_dir: str | None = None) -> bool:
        make_importable(spec_dir)
        return inspect.iscoroutinefunction(_load(self.function).fn)

    def score(self, sample: Sample) -> Any:
        call = _load(self.function)
        if call.pass_sample:
            result = call.fn(sample)
        else:
            values = {name: getattr(sample, name) for name in _ARGUMENTS}
            result = call.fn(
                *(values[name] for name in call.positional), **{name: values[name] for name in call.keywords}
            )
        if inspect.isawaitable(result):
            return self._settle(result)
        return _to_score(self.function, result)

    async def _settle(self, pending: Awaitable[Any]) -> Any:
        return _to_score(self.function, await pending)
