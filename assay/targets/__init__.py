"""Targets: what an eval runs over its dataset.

`open_target(spec, ...)` builds the target a spec names; every target is an async callable
`target(item, trial) -> TargetResult` that raises `TargetFailure` when the call failed for good.
"""

from __future__ import annotations

from assay.accounting import Usage
from assay.spec import OpenAITarget, PythonTarget
from assay.targets._base import Target, TargetResult
from assay.targets._openai import OpenAIChatTarget, render
from assay.targets._python import PythonFunctionTarget

__all__ = [
    "OpenAIChatTarget",
    "PythonFunctionTarget",
    "Target",
    "TargetResult",
    "Usage",
    "open_target",
    "render",
]


def open_target(
    spec: OpenAITarget | PythonTarget,
    *,
    concurrency: int,
    seed: int,
    search_path: str | None,
) -> Target:
    """Build the target a spec names.

    Args:
        spec: the spec's `target`.
        concurrency: the run's concurrency (sizes connection and thread pools).
        seed: the run's seed.
        search_path: the spec's folder, importable by `python` targets.
    """
    if isinstance(spec, OpenAITarget):
        return OpenAIChatTarget(spec, concurrency=concurrency, seed=seed)
    return PythonFunctionTarget(spec, concurrency=concurrency, seed=seed, search_path=search_path)
