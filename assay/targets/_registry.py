"""The registry of target kinds: `kind_of(spec.target)` is how anything outside a kind's own
module learns what that kind does — nothing else asks which spec model a target is."""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any

from assay.spec import EvalSpec, TargetSpec
from assay.targets._base import Target
from assay.targets._kind import TargetContext, TargetKind

# kind name -> (module, class): a kind's module is imported when a spec first names it, so a run
# of an `openai` target never loads the HTTP agent's protocol models or the Docker SDK.
_WHERE = {
    "openai": ("assay.targets.openai", "OpenAIKind"),
    "anthropic": ("assay.targets.anthropic", "AnthropicKind"),
    "python": ("assay.targets.python", "PythonKind"),
    "http_agent": ("assay.targets.http_agent", "HttpAgentKind"),
    "container": ("assay.targets.container", "ContainerKind"),
}


class _Kinds(Mapping[str, TargetKind[Any]]):
    """Every registered kind by name, each built on first use."""

    def __init__(self) -> None:
        self._built: dict[str, TargetKind[Any]] = {}

    def __getitem__(self, name: str) -> TargetKind[Any]:
        kind = self._built.get(name)
        if kind is None:
            module, cls = _WHERE[name]
            kind = self._built[name] = getattr(importlib.import_module(module), cls)()
        return kind

    def __iter__(self) -> Iterator[str]:
        return iter(_WHERE)

    def __len__(self) -> int:
        return len(_WHERE)


KINDS: Mapping[str, TargetKind[Any]] = _Kinds()


def kind_of(spec: TargetSpec) -> TargetKind[Any]:
    """The kind of a target spec (`spec.kind`, e.g. `openai`)."""
    return KINDS[spec.kind]


def open_target(
    spec: TargetSpec,
    *,
    concurrency: int,
    seed: int,
    spec_dir: str | None,
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
        spec_dir: the spec's folder, importable by `python` targets.
        run_id: the run's id.
        capabilities: the run's target snapshot (what its kind's `prepare` returned).
        store: the run's store, where targets keep their attempts' artifacts.
        redact: patterns never stored (a `container` target's transcripts and diffs).
    """
    context = TargetContext(
        concurrency=concurrency,
        seed=seed,
        spec_dir=spec_dir,
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
