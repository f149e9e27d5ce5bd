"""Targets: what an eval runs over its dataset.

`open_target(spec, ...)` builds the target a spec names; every target is an async callable
`target(item, trial) -> TargetResult` that raises `TargetFailure` when the call failed for good.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.calls.accounting import Usage
from assay.spec import ContainerTarget, HttpAgentTarget, OpenAITarget, PythonTarget
from assay.spec.dataset import Item
from assay.targets._base import SandboxedTarget, SessionState, SessionTarget, Target, TargetResult
from assay.targets.http_agent import HttpAgent, item_files, prepare_http_agent
from assay.targets.openai import OpenAIChatTarget, render
from assay.targets.python import PythonFunctionTarget

__all__ = [
    "HttpAgent",
    "OpenAIChatTarget",
    "PythonFunctionTarget",
    "SandboxedTarget",
    "SessionState",
    "SessionTarget",
    "Target",
    "TargetResult",
    "Usage",
    "fixture_files",
    "open_target",
    "prepare_http_agent",
    "render",
]


def open_target(
    spec: OpenAITarget | PythonTarget | HttpAgentTarget | ContainerTarget,
    *,
    concurrency: int,
    seed: int,
    search_path: str | None,
    run_id: str | None = None,
    capabilities: dict[str, Any] | None = None,
    store: Any = None,
    redact: list[str] | None = None,
) -> Target:
    """Build the target a spec names.

    Args:
        spec: the spec's `target`.
        concurrency: the run's concurrency (sizes connection and thread pools).
        seed: the run's seed.
        search_path: the spec's folder, importable by `python` targets.
        run_id: the run's id (`http_agent` targets send it in each harness run's metadata).
        capabilities: the run's target snapshot: an `http_agent`'s capabilities, a `container`'s
            image id and user.
        store: the run's store: a `container` target keeps its attempts' artifacts there; an
            `http_agent` its attempts' artifacts and trajectories, and the harness run ids it
            was given (under `run_id`).
        redact: patterns never stored (a `container` target's transcripts and diffs).
    """
    if isinstance(spec, ContainerTarget):
        # Imported here: the Docker SDK is only loaded by runs that use it.
        from assay.targets.container import ContainerAgent

        return ContainerAgent(
            spec,
            snapshot=capabilities or {},
            concurrency=concurrency,
            store=store,
            run_id=run_id or "",
            spec_dir=Path(search_path or "."),
            redact=redact,
        )
    if isinstance(spec, OpenAITarget):
        return OpenAIChatTarget(spec, concurrency=concurrency, seed=seed)
    if isinstance(spec, HttpAgentTarget):
        return HttpAgent(
            spec,
            concurrency=concurrency,
            seed=seed,
            run_id=run_id,
            capabilities=capabilities,
            store=store,
            base_dir=search_path,
        )
    return PythonFunctionTarget(spec, concurrency=concurrency, seed=seed, search_path=search_path)


def fixture_files(
    spec: OpenAITarget | PythonTarget | HttpAgentTarget | ContainerTarget, items: list[Item], spec_dir: Path
) -> list[Path]:
    """The local files a target hands its agent (their content belongs to the run's identity):
    a container's fixture and checks folders, an http_agent's local fixture files. Files that
    are missing or outside the spec's folder are left out (preflight reports them)."""
    root = spec_dir.resolve()
    found: set[Path] = set()
    if isinstance(spec, ContainerTarget):
        for template in (spec.fixtures, spec.checks):
            if template is None:
                continue
            for item in items:
                try:
                    folder = (root / render(template, item)).resolve()
                except (KeyError, IndexError, ValueError):
                    continue
                if folder.is_relative_to(root) and folder.is_dir():
                    found.update(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink())
    elif isinstance(spec, HttpAgentTarget):
        for item in items:
            try:
                entries = item_files(item)
            except (TypeError, ValueError):
                continue
            for entry in entries:
                path = (root / entry["file"]).resolve() if "file" in entry else None
                if path is not None and path.is_relative_to(root) and path.is_file():
                    found.add(path)
    return sorted(found)
