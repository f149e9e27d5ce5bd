"""Templates — `str.format` over named fields — said once for the targets' `prompt` / `system`,
the judges' `rubric` / `system` and `code_exec`'s checks and files: why one cannot be filled,
which fields it names, how a field's value shows, and a name no item has with its nearest."""

from __future__ import annotations

import difflib
import json
import re
import string
from collections.abc import Iterable
from typing import Any


def template_problem(template: str, *, example: str) -> str | None:
    """Why `template` cannot be rendered with named fields, or None when it can.

    Args:
        template: the template as the spec gives it.
        example: a field the message suggests instead of a positional one, e.g. `{output}`.
    """
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        return str(exc)
    for name in names:
        head = re.split(r"[.\[]", name, maxsplit=1)[0]
        if head == "" or head.isdigit():
            return f"positional field {{{name}}} cannot be filled; name a {example}"
        if "." in name.split("[", 1)[0]:
            return f"attribute access in {{{name}}} is not supported; use {{field[key]}} for nested values"
    return None


def named_fields(template: str) -> list[str]:
    """The top-level fields a template names, in order (`{test[0]}` names `test`); the template
    must parse (`template_problem`)."""
    names = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    return [re.split(r"[.\[]", name, maxsplit=1)[0] for name in names]


def unknown_field(name: str, known: Iterable[str]) -> str:
    """`{entrypoint} names no field of the dataset; did you mean 'entry_point'?`"""
    if not name.isidentifier():  # `awk '{print $1}'`: a brace meant as itself
        return f"{{{name}}} is no field name; write {{{{ and }}}} for a literal brace"
    known = sorted(known)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"its fields: {', '.join(known)}"
    return f"{{{name}}} names no field of the dataset; {hint}"


class FieldValue:
    """A value as a template shows it: text as is, None as `none`, anything else as JSON;
    `{field[key]}` indexes into it.

    Args:
        value: the field's value.
        none: what None shows as.
    """

    __slots__ = ("none", "value")

    def __init__(self, value: Any, none: str = "(none)") -> None:
        self.value = value
        self.none = none

    def __getitem__(self, key: Any) -> FieldValue:
        return FieldValue(self.value[key], self.none)

    def __str__(self) -> str:
        if isinstance(self.value, str):
            return self.value
        if self.value is None:
            return self.none
        return json.dumps(self.value, ensure_ascii=False, default=str)

    def __repr__(self) -> str:
        return repr(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)
