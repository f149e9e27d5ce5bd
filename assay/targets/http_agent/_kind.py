"""`HttpAgentKind`, `kind: http_agent` for the run: the harness's capabilities asked once and kept on
the run (`prepare_http_agent`, for synchronous callers), the items' local fixture files part of
its identity."""

from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, ClassVar

from assay.calls.endpoint import ENDPOINT_SETTINGS
from assay.spec import HttpAgentTarget
from assay.spec.dataset import Item
from assay.targets._kind import TargetContext, TargetKind
from assay.targets.http_agent._agent import HttpAgent
from assay.targets.http_agent._files import item_files


def prepare_http_agent(
    spec: HttpAgentTarget,
    items: list[Item],
    *,
    stored: dict[str, Any] | None = None,
    spec_dir: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """`HttpAgent.prepare` for synchronous callers (planning, before anything is written): runs it
    on its own event loop in a worker thread, so it works whether or not a loop is running here.

    Args:
        spec: the target spec.
        items: the run's items.
        stored: the run's stored snapshot (a resumed run): used as is, the harness is not asked.
        spec_dir: the folder local fixture files are relative to (the spec's); they must exist.

    Raises:
        HarnessError, DatasetError: as `HttpAgent.prepare`.
    """

    async def prepare() -> dict[str, Any]:
        agent = HttpAgent(spec, concurrency=1, capabilities=stored, spec_dir=spec_dir)
        try:
            return await agent.prepare(items)
        finally:
            await agent.aclose()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="http-agent-prepare") as pool:
        return pool.submit(asyncio.run, prepare()).result()


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
