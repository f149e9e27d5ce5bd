"""Spec problems in words: one line per pydantic error, naming the field, what is wrong and the
bad value (union tags dropped, close field names suggested)."""

from __future__ import annotations

import difflib
from typing import Any, get_args

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from assay.evaluators import SCORER_KINDS, ScorerSpec
from assay.spec.models import DatasetSpec, EvalSpec
from assay.spec.targets import TARGET_KINDS, TargetSpec

# What a `pattern=` constraint means, for people (the regex itself is no help).
_PATTERN_HINTS = {
    r"^[\w.\-]+$": "use only letters, digits, '_', '.' and '-'",
    r"^https?://": "must start with http:// or https://",
    r"^[\w.]+:[\w.]+$": "expected 'module:function'",
}

MAX_REPR = 120


def short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= MAX_REPR else text[: MAX_REPR - 3] + "..."


def _readable_loc(loc: tuple[Any, ...], data: Any) -> tuple[list[Any], Any]:
    """The error's location with union tags dropped (`target.openai.base_url` -> `target.base_url`),
    and the spec node that holds the field (for naming its allowed fields)."""
    path: list[Any] = []
    node, parent = data, None
    for part in loc:
        is_key = isinstance(node, dict) and part in node
        is_index = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if is_key or is_index:
            parent, node = node, node[part]
        elif isinstance(node, dict) and node.get("kind") == part:
            continue  # the discriminated union's tag, not a field of the spec
        else:
            parent, node = node, None
        path.append(part)
    return path, parent


def _allowed_fields(path: list[Any], parent: Any) -> list[str]:
    """The field names allowed where `path` (an unknown field) sits, when known."""
    models: list[type[BaseModel]] = []
    if len(path) == 1:
        models = [EvalSpec]
    elif path[:-1] == ["dataset"]:
        models = [DatasetSpec]
    elif isinstance(parent, dict) and (path[:-1] == ["target"] or (len(path) == 3 and path[0] == "scorers")):
        union = TargetSpec if path[0] == "target" else ScorerSpec
        for cls in _union_members(union):
            if parent.get("kind") in _kinds_of(cls):
                models = [cls]
    return sorted({f.alias or name for cls in models for name, f in cls.model_fields.items()})


def _union_members(union: Any) -> list[type[BaseModel]]:
    return list(get_args(get_args(union)[0]))


def _kinds_of(cls: type[BaseModel]) -> tuple[Any, ...]:
    return get_args(cls.model_fields["kind"].annotation)


def _describe(error: ErrorDetails, data: Any = None) -> str:
    """One line for one pydantic error: the field's path, what is wrong, and the bad value."""
    path, parent = _readable_loc(tuple(error["loc"]), data)
    where = ".".join(str(p) for p in path) or "(top level)"
    kind, message, value = error["type"], error["msg"], error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return f"{where}: required field is missing"
    if kind == "extra_forbidden":
        allowed = _allowed_fields(path, parent)
        hint = ""
        if allowed:
            close = difflib.get_close_matches(str(path[-1]), allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(allowed)}"
        return f"{where}: unknown field (value {short(value)}){hint}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        discriminator = str(ctx.get("discriminator", "kind")).strip("'\"")
        kinds = SCORER_KINDS if path[:1] == ["scorers"] else TARGET_KINDS
        one_of = ", ".join(kinds)
        if kind == "union_tag_not_found":
            return f"{where}.{discriminator}: required field is missing; one of: {one_of}"
        tag = value.get(discriminator) if isinstance(value, dict) else ctx.get("tag")
        return f"{where}.{discriminator}: unknown {discriminator} {short(tag)}; one of: {one_of}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"{where}: expected a mapping of fields, got {short(value)}"
    if kind == "list_type":
        return f"{where}: expected a list, got {short(value)}"
    if kind == "string_pattern_mismatch" and ctx.get("pattern") in _PATTERN_HINTS:
        return f"{where}: {_PATTERN_HINTS[ctx['pattern']]} (got {short(value)})"
    if kind in ("value_error", "assertion_error"):
        message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        # Validators name the bad value themselves; a whole mapping or list would only be noise.
        if message.startswith((f"{where}.", f"{where}:")):
            return message  # the validator named the field itself, below this one
        if isinstance(value, dict | list) or repr(value) in message:
            return f"{where}: {message}"
    return f"{where}: {message} (got {short(value)})"


def describe_errors(exc: ValidationError, data: Any = None) -> list[str]:
    """One readable line per problem of a pydantic validation error over `data`."""
    return [_describe(e, data) for e in exc.errors(include_url=False)]
