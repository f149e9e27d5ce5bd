"""Reading a spec file: YAML (a repeated key refused), then validation, every problem at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from assay.errors import SpecError
from assay.spec._errors import MAX_REPR, describe_errors, short
from assay.spec.models import EvalSpec


def parse_spec(data: Any, *, source: str = "spec") -> EvalSpec:
    """Validate an already-parsed spec document; raises `SpecError` listing every problem."""
    if data is None:
        raise SpecError(
            "the spec is empty: expected a mapping with name, dataset, target and scorers", source=source
        )
    if not isinstance(data, dict):
        raise SpecError(
            f"expected a mapping at the top level (name, dataset, target, scorers, ...), "
            f"got {type(data).__name__} {short(data)}",
            source=source,
        )
    try:
        return EvalSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(describe_errors(exc, data), source=source) from None


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses a key repeated in one mapping (plain YAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the base class reports it
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first at line {first.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def load_spec(path: str | Path) -> EvalSpec:
    """Read and validate a YAML (or JSON) spec file.

    Args:
        path: the spec file; relative paths inside it are relative to its folder.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise SpecError(f"cannot read spec: {exc.strerror}", source=str(path)) from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"cannot read spec: not UTF-8 text (byte {exc.start})", source=str(path)) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = ""
        if mark is not None:
            lines = text.splitlines()
            line = lines[mark.line].strip() if mark.line < len(lines) else ""
            where = f"line {mark.line + 1}, column {mark.column + 1}: "
            if line:
                where += f"{line[:MAX_REPR]!r}: "
        raise SpecError(
            f"{where}not valid YAML: {getattr(exc, 'problem', None) or exc}", source=str(path)
        ) from None
    return parse_spec(data, source=str(path))


def spec_title(path: str | Path) -> str:
    """What to call a spec in a title even when it is invalid: its `name` when the file is YAML
    with a text `name`, else the file's name.

    Args:
        path: the spec file.
    """
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8-sig"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        data = None
    name = data.get("name") if isinstance(data, dict) else None
    return name if isinstance(name, str) and name.strip() else Path(path).name
