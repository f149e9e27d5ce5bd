"""The registry of target kinds: `kind_of(spec.target)` is how anything outside a kind's own
module learns what that kind does — nothing else asks which spec model a target is."""

from __future__ import annotations

from typing import Any

from assay.spec import EvalSpec, TargetSpec
from assay.targets._base import Target
from assay.targets._kind import TargetContext, TargetKind
from assay.targets.anthropic import AnthropicKind
from assay.targets.container import ContainerKind
from assay.targets.http_agent import HttpAgentKind
from assay.targets.openai import OpenAIKind
from assay.targets.python import PythonKind

KINDS: dict[str, TargetKind[Any]] = {
    kind.name: kind
    for kind in (OpenAIKind(), AnthropicKind(), PythonKind(), HttpAgentKind(), ContainerKind())
}


def kind_of(spec: TargetSpec) -> TargetKind[Any]:
    """The kind of a target spec (`spec.kind`, e.g. `openai`)."""
    return KINDS[spec.kind]


def open_target(
    spec: TargetSpec,
    *,
    concurrency: int,
    seed: int,
    search_path: str | None,
    run_id: str | None = None,
    capabilities: dict[str, Any] | None = None,
    store: Any = None,
    redact: list[str] | None = None,
) -> Target:
    """Build the target a spec names (its kind's `open`).

    Args:
        spec: the spec's `target`.
        concurrency: the run's concurrency (sizes connection and thread pools).
        seed: the run's seed.
        search_path: the spec's folder, importable by `python` targets.
        run_id: the run's id.
        capabilities: the run's target snapshot (what its kind's `prepare` returned).
        store: the run's store, where targets keep their attempts' artifacts.
        redact: patterns never stored (a `container` target's transcripts and diffs).
    """
    context = TargetContext(
        concurrency=concurrency,
        seed=seed,
        spec_dir=search_path,
        run_id=run_id,
        snapshot=capabilities,
        store=store,
        redact=redact,
    )
    return kind_of(spec).open(spec, context)


def makes_containers(spec: EvalSpec) -> bool:
    """Whether a run of this spec creates Docker containers (so its end removes what is left):
    its target's kind says so, or one of its scorers does (`code_exec` with `where: fresh`)."""
    target = spec.target
    return (target is not None and kind_of(target).makes_containers) or any(
        scorer.makes_containers for scorer in spec.scorers
    )
