"""Resolving the `module:function` references a spec names (targets, user scorers, `applies`, policies)."""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable
from typing import Any


def make_importable(spec_dir: str | None) -> None:
    """Put `spec_dir` at the front of `sys.path`, unless it is already there.

    Args:
        spec_dir: a folder (usually the spec's) whose modules a spec may reference; None does nothing.
    """
    if spec_dir is None:
        return
    path = os.path.abspath(spec_dir)
    if path not in sys.path:
        sys.path.insert(0, path)


def _forget_another_folders(module_name: str, spec_dir: str) -> None:
    """When `spec_dir` holds the module `module_name` starts with, but the one this process
    imported is another folder's (a second spec's `solver.py` in one process), forget that one
    and put `spec_dir` first, so the import below finds this spec's own."""
    top = module_name.partition(".")[0]
    folder = os.path.abspath(spec_dir)
    here = [os.path.join(folder, f"{top}.py"), os.path.join(folder, top, "__init__.py")]
    if not any(os.path.isfile(path) for path in here):
        return
    cached = sys.modules.get(top)
    if cached is not None and os.path.abspath(getattr(cached, "__file__", None) or "") not in here:
        for name in [n for n in sys.modules if n == top or n.startswith(f"{top}.")]:
            del sys.modules[name]
    if sys.path[:1] != [folder]:
        if folder in sys.path:
            sys.path.remove(folder)
        sys.path.insert(0, folder)
    importlib.invalidate_caches()


def import_callable(ref: str, spec_dir: str | None = None) -> Callable[..., Any]:
    """Import the callable `ref` names. Errors raised by the module's own code propagate.

    Args:
        ref: `module:attribute`, where the module may be dotted (`pkg.mod`) and so may the attribute
            (`Class.method`).
        spec_dir: a folder made importable first (see `make_importable`).

    Raises:
        ValueError: naming `ref`, when it is malformed or its module or attribute is missing.
        TypeError: naming `ref`, when the attribute is not callable.
    """
    module_name, _, attr_path = ref.partition(":")
    if not module_name or not attr_path:
        raise ValueError(f"{ref!r} is not a reference of the form 'module:function'")
    make_importable(spec_dir)
    if spec_dir is not None:
        _forget_another_folders(module_name, spec_dir)
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        # Also covers a missing dependency of the module; the message says which module.
        raise ValueError(f"cannot import {ref!r}: {exc}") from exc
    for attr in attr_path.split("."):
        try:
            obj = getattr(obj, attr)
        except AttributeError:
            raise ValueError(
                f"cannot import {ref!r}: {module_name!r} has no attribute {attr_path!r}"
            ) from None
    if not callable(obj):
        raise TypeError(f"cannot use {ref!r}: {type(obj).__name__} object is not callable")
    return obj


def resolve_callable(ref: str, spec_dir: str | None = None) -> Callable[..., Any]:
    """`import_callable`, with every failure a `ValueError` or `TypeError` saying why — also an
    exception the module's own code raised while it was imported.

    Args:
        ref: `module:function`.
        spec_dir: a folder made importable first.
    """
    try:
        return import_callable(ref, spec_dir=spec_dir)
    except (ValueError, TypeError):
        raise
    except Exception as exc:  # noqa: BLE001 - the module's own code failed on import
        raise ValueError(f"importing {ref!r} raised {type(exc).__name__}: {exc}") from None
