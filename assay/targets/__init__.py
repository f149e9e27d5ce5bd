"""Targets: what an eval runs over its dataset.

`open_target(spec, ...)` builds the target a spec names; every target is an async callable
`target(item, trial) -> TargetResult` that raises `TargetFailure` when the call failed for good.
"""

from __future__ import annotations

from typing import Any

from assay.accounting import Usage
from assay.spec import HttpAgentTarget, OpenAITarget, PythonTarget
from assay.targets._base import Target, TargetResult
from assay.targets._http_agent import HttpAgent, prepare_http_agent
from assay.targets._openai import OpenAIChatTarget, render
from assay.targets._python import PythonFunctionTarget

__all__ = [
    "HttpAgent",
    "OpenAIChatTarget",
    "PythonFunctionTarget",
    "Target",
    "TargetResult",
    "Usage",
    "open_target",
    "prepare_http_agent",
    "render",
]


def open_target(
    spec: OpenAITarget | PythonTarget | HttpAgentTarget,
    *,
    concurrency: int,
    seed: int,
    search_path: str | None,
    run_id: str | None = None,
    capabilities: dict[str, Any] | None = None,
) -> Target:
    """Build the target a spec names.

    Args:
        spec: the spec's `target`.
        concurrency: the run's concurrency (sizes connection and thread pools).
        seed: the run's seed.
        search_path: the spec's folder, importable by `python` targets.
        run_id: the run's id (`http_agent` targets send it in each harness run's metadata).
        capabilities: an `http_agent` target's stored capabilities snapshot (a resumed run).
    """
    if isinstance(spec, OpenAITarget):
        return OpenAIChatTarget(spec, concurrency=concurrency, seed=seed)
    if isinstance(spec, HttpAgentTarget):
        return HttpAgent(spec, concurrency=concurrency, seed=seed, run_id=run_id, capabilities=capabilities)
    return PythonFunctionTarget(spec, concurrency=concurrency, seed=seed, search_path=search_path)
