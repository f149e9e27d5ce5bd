"""Rewrite docs/spec.md, the eval spec's full reference, from its pydantic models (run after
changing a spec model, a scorer or the endpoint).

    .venv/bin/python docs/update_spec.py

Each field's meaning is its model's documentation: the field's own description when it has one,
else its docstring (the string right under the field, inspect_ai's style), else its entry under
`Args:` in the docstring of its class (or of the class it inherits it from).
tests/spec/test_spec_doc.py fails while docs/spec.md and the models disagree, and names every field
left without a meaning. The page is written whole: its prose is the models' docstrings.
"""

from __future__ import annotations

import ast
import enum
import functools
import inspect
import itertools
import re
import textwrap
import types
from pathlib import Path
from typing import Annotated, Any, Literal, Union, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from assay.evaluators import SCORER_CLASSES, Scorer
from assay.spec.models import DatasetSpec, EvalSpec
from assay.spec.targets import TargetSpec

DOC = Path(__file__).with_name("spec.md")

HEAD = """# The eval spec: every field

Generated from the spec's pydantic models by `docs/update_spec.py` (do not edit by hand: change the
model's docstring and run it; `tests/spec/test_spec_doc.py` fails while this page is stale). The README
shows a spec; docs/quickstart.md walks through one. A field not listed here is refused (exit 2,
naming it), and so is a bad value.
"""


def _anchor(model: type[BaseModel]) -> str:
    return model.__name__.lower()


def _cleandoc(model: type) -> str:
    return inspect.cleandoc(model.__doc__ or "")


def described(model: type) -> str:
    """The text of a model's docstring above its `Args:`, its lines joined into paragraphs."""
    text = _cleandoc(model).split("\nArgs:", 1)[0].strip()
    return "\n\n".join(" ".join(p.split()) for p in text.split("\n\n") if p.strip())


def args_of(model: type) -> dict[str, str]:
    """The `Args:` entries of one class's own docstring: field name -> its meaning."""
    lines = _cleandoc(model).split("\n")
    if "Args:" not in lines:
        return {}
    entries: dict[str, str] = {}
    names: list[str] = []
    for line in lines[lines.index("Args:") + 1 :]:
        if line.strip() and not line.startswith("    "):
            break
        if match := re.fullmatch(r" {4}([\w, ]+): (.*)", line):
            names = [n.strip() for n in match.group(1).split(",")]
            for name in names:
                entries[name] = match.group(2).strip()
        elif line.strip():
            for name in names:
                entries[name] += " " + line.strip()
    return entries


@functools.cache
def attribute_docs(model: type) -> dict[str, str]:
    """The docstrings written right under one class's own fields: field name -> its meaning."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(model)))
    except (OSError, TypeError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    docs = {}
    for field, after in itertools.pairwise(body):
        if (
            isinstance(field, ast.AnnAssign)
            and isinstance(field.target, ast.Name)
            and isinstance(after, ast.Expr)
            and isinstance(after.value, ast.Constant)
            and isinstance(after.value.value, str)
        ):
            docs[field.target.id] = " ".join(inspect.cleandoc(after.value.value).split())
    return docs


def meaning(model: type[BaseModel], field: str) -> str:
    """A field's meaning: its own description, else its docstring, else the nearest class's
    `Args:` entry for it."""
    info = model.model_fields[field]
    if info.description:
        return " ".join(info.description.split())
    for cls in model.__mro__:
        if (doc := attribute_docs(cls).get(field)) is not None:
            return doc
        entries = args_of(cls)
        if (entry := entries.get(field, entries.get(info.alias or field))) is not None:
            return entry
    return ""


def _type(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        return _type(args[0])
    if origin is Literal:
        return " \\| ".join(f"`{a!r}`".replace("'", '"') for a in args)
    if origin in (Union, types.UnionType) and set(args) >= set(TARGETS):
        return "a [target](#targets)" + (" \\| none" if type(None) in args else "")
    if origin in (Union, types.UnionType) and set(args) >= set(SCORER_CLASSES.values()):
        return "a [scorer](#scorers)"
    if origin in (Union, types.UnionType):
        return " \\| ".join(_type(a) for a in args if a is not type(None)) + (
            " \\| none" if type(None) in args else ""
        )
    if origin in (list, tuple, set, frozenset):
        inner = [a for a in args if a is not Ellipsis]
        return f"list of {_type(inner[0])}" if inner else "list"
    if origin is dict:
        return f"mapping of {_type(args[0])} to {_type(args[1])}" if args else "mapping"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{_anchor(annotation)})"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f'`"{m.value}"`' for m in annotation)
    names = {str: "text", int: "integer", float: "number", bool: "boolean", type(None): "none"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _default(model: type[BaseModel], field: str) -> str:
    info = model.model_fields[field]
    if info.is_required():
        return "required"
    value = info.default_factory() if info.default_factory is not None else info.default  # type: ignore[call-arg]
    if value is PydanticUndefined or value is None:
        return "none"
    if isinstance(value, BaseModel):
        return "its defaults"
    if isinstance(value, str) and len(value) > 30:
        return "built in" if "\n" in value else f"`{value[:27]}…`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, (list, tuple, dict)) and not value:
        return "`{}`" if isinstance(value, dict) else "`[]`"
    if isinstance(value, int) and value >= 2**20 and value % 2**20 == 0:
        return f"`{value}` ({value // 2**20} MiB)"
    return f"`{value}`"


def table(model: type[BaseModel], leave_out: frozenset[str] = frozenset()) -> str:
    rows = ["| field | type | default | meaning |", "|---|---|---|---|"]
    # `kind` first: it says which model the rest of the table belongs to.
    names = sorted(model.model_fields, key=lambda name: name != "kind")
    for name in names:
        info = model.model_fields[name]
        if name in leave_out:
            continue
        shown = info.alias or name
        text = meaning(model, name).replace("|", "\\|")
        rows.append(f"| `{shown}` | {_type(info.annotation)} | {_default(model, name)} | {text} |")
    return "\n".join(rows) if len(rows) > 2 else "No fields beyond every scorer's."


def _nested(model: type[BaseModel]) -> list[type[BaseModel]]:
    """The models a model's fields name, in field order."""
    found: list[type[BaseModel]] = []

    def walk(annotation: Any) -> None:
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            found.append(annotation)
        for arg in get_args(annotation):
            walk(arg)

    for info in model.model_fields.values():
        walk(info.annotation)
    return found


def _kind(model: type[BaseModel]) -> str:
    (kind,) = get_args(model.model_fields["kind"].annotation)
    return kind


TARGETS: list[type[BaseModel]] = list(get_args(get_args(TargetSpec)[0]))
# A scorer's table leaves out the fields every scorer has (listed once), unless it sets its own.
COMMON = frozenset(Scorer.model_fields)


def sections() -> list[tuple[str, type[BaseModel], str]]:
    """(heading, model, its table) for every model of the spec, in the page's order."""
    out: list[tuple[str, type[BaseModel], str]] = [
        ("EvalSpec: the top level", EvalSpec, table(EvalSpec)),
        ("dataset", DatasetSpec, table(DatasetSpec)),
    ]
    out += [(f"target kind `{_kind(m)}`", m, table(m)) for m in TARGETS]
    out.append(("Every scorer", Scorer, table(Scorer)))
    for scorer in SCORER_CLASSES.values():
        own = frozenset(f for f in COMMON if scorer.model_fields[f].default == Scorer.model_fields[f].default)
        out.append((f"scorer `{_kind(scorer)}`", scorer, table(scorer, own | {"kind"})))
    seen = {model for _, model, _ in out}
    queue = [model for _, model, _ in out]
    while queue:
        for model in _nested(queue.pop(0)):
            if model not in seen:
                seen.add(model)
                queue.append(model)
                out.append((model.__name__, model, table(model)))
    return out


def undocumented() -> list[str]:
    """`Model.field` for every field of the reference without a meaning."""
    return [
        f"{model.__name__}.{name}"
        for _, model, _ in sections()
        for name in model.model_fields
        if not meaning(model, name)
    ]


def render() -> str:
    parts = [HEAD]
    named = [heading for heading, _, _ in sections()]
    first_nested = named[2 + len(TARGETS) + 1 + len(SCORER_CLASSES)]
    groups = {
        "EvalSpec: the top level": "## The spec",
        f"target kind `{_kind(TARGETS[0])}`": "## Targets",
        "Every scorer": "## Scorers",
        first_nested: "## Settings inside a field",
    }
    for heading, model, rows in sections():
        if heading in groups:
            parts.append(groups[heading] + "\n")
        text = described(model)
        parts.append(f'<a id="{_anchor(model)}"></a>\n\n### {heading}\n\n{text}\n\n{rows}\n')
    return "\n".join(parts)


if __name__ == "__main__":
    missing = undocumented()
    if missing:
        raise SystemExit(f"fields without a meaning (document them in their model): {', '.join(missing)}")
    DOC.write_text(render(), encoding="utf-8")
