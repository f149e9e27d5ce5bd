"""Public names re-exported by a package without importing its modules until a name is used.

A room's `__init__` re-exports its public names; most import them outright. A room whose modules
are costly and used one at a time (analysis: Polars, NumPy, the comparison's models; sandbox: the
Docker SDK) re-exports them lazily (PEP 562), so that `assay run`, which needs one module of each,
does not pay for the others (~150 ms and ~400 ms here).
"""

from __future__ import annotations

import importlib
import sys
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
