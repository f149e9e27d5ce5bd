"""Public names re-exported by a package without importing its modules until a name is used.

A room's `__init__` re-exports its public names; most import them outright. A room whose modules
are costly and used one at a time (analysis: Polars, NumPy, the comparison's models; sandbox: the
Docker SDK) re-exports them lazily (PEP 562), so that `assay run`, which needs one module of each,
does not pay for the others (figures: docs/performance.md).
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable
from typing import Any


def lazy_exports(
    package: str, modules: dict[str, tuple[str, ...]]
) -> tuple[list[str], Callable[[str], Any], Callable[[], list[str]]]:
    """A package's `__all__`, `__getattr__` and `__dir__`, serving its modules' names on first use.

    A name must not be a module's of the package too: once that module is imported, the package's
    attribute is the module, and `__getattr__` is never asked.

    Args:
        package: the package's `__name__`.
        modules: a module of the package (e.g. `"summary"`) -> the public names it defines.
    """
    where = {name: module for module, names in modules.items() for name in names}

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{module}"), name)

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *where})

    return sorted(where), __getattr__, __dir__


class _LazyModule:
    """A module imported on its first attribute access (`lazy_module`)."""

    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        # import_module takes the module's import lock: two threads asking at once import it once.
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<lazy module {self._name!r}>"


def lazy_module(name: str) -> Any:
    """`name` (e.g. `"polars"`), imported when one of its attributes is first used.

    For a module a room needs only on some paths: `assay run` plans and executes without Polars
    and loads it while the last calls are in flight (`warm_up`), to summarise at the end.
    Import the real module under `TYPE_CHECKING` beside it, so type checkers see its names.
    """
    return _LazyModule(name)


def warm_up(*names: str) -> threading.Thread:
    """Import the modules in a background thread: while a run waits on its target, the modules
    its closing needs load in the idle time instead of after the last item.
    An import that fails here fails again, with its traceback, where the module is used."""

    def load() -> None:
        for name in names:
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001, S112 - reported by the real import, where it is used
                continue

    thread = threading.Thread(target=load, name="assay-warm-up", daemon=True)
    thread.start()
    return thread
