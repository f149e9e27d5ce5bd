"""Prompt templates — `str.format` over named fields — and why one cannot be filled, said once for
the targets' `prompt` / `system` and the judges' `rubric` / `system`."""

from __future__ import annotations

import re
import string


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
