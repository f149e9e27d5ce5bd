"""`HttpAgentKind`, `kind: http_agent` for the run: the harness's capabilities asked once and kept on
the run, the items' local fixture files part of its identity."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from assay.calls.endpoint import ENDPOINT_SETTINGS
from assay.spec import HttpAgentTarget
from assay.spec.dataset import Item
from assay.targets._kind import TargetContext, TargetKind
from assay.targets.http_agent._agent import HttpAgent, prepare_http_agent
from assay.targets.http_agent._files import item_files


class HttpAgentKind(TargetKind[HttpAgentTarget]):
    """An agent behind an HTTP harness (docs/harness-protocol.md); its spend is its own."""

    name = "http_agent"
    operational: ClassVar[frozenset[str]] = ENDPOINT_SETTINGS | {
        "poll_interval",
        "request_timeout",
        # Which artifacts it keeps, not what it answers: a resume may change them.
        "max_artifact_bytes",
        "max_attempt_bytes",
    }

    def prepare(
        self, spec: HttpAgentTarget, items: list[Item], spec_dir: Path, stored: dict[str, Any] | None
    ) -> dict[str, Any]:
        """The harness's capabilities (asked now, or the stored ones on a resume), what they
        leave out (`dropped_items`) and what they ignore (`warnings`)."""
        return prepare_http_agent(spec, items, stored=stored, spec_dir=spec_dir)

    def fixture_files(self, spec: HttpAgentTarget, items: list[Item], spec_dir: Path) -> list[Path]:
        """The items' local fixture files (`{path, file}` entries of their `files` field)."""
        root = spec_dir.resolve()
        found: set[Path] = set()
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

    def open(self, spec: HttpAgentTarget, context: TargetContext) -> HttpAgent:
        return HttpAgent(
            spec,
            concurrency=context.concurrency,
            seed=context.seed,
            run_id=context.run_id,
            capabilities=context.snapshot,
            store=context.store,
            spec_dir=context.spec_dir,
        )
