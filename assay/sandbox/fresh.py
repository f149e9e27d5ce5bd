"""A fresh, short-lived sandbox for a scorer (`code_exec` with `where: fresh`): the same isolation
as an attempt's container, labelled with the run's id, removed on the way out."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import cache
from typing import Any

from assay.sandbox._docker import (
    RUN_LABEL,
    WORKSPACE,
    ExecResult,
    ImageFacts,
    Limits,
    Sandbox,
    client,
    inspect_image,
)


class FreshSandbox:
    """`await exec(argv, timeout=…)` in a fresh container."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._sandbox = sandbox

    async def exec(self, argv: list[str], *, timeout: float | None = None) -> ExecResult:
        return await asyncio.to_thread(self._sandbox.exec, argv, timeout=timeout)


@cache
def _engine() -> Any:
    return client()


@cache
def _facts(image: str) -> ImageFacts:
    return inspect_image(_engine(), image, None)


@asynccontextmanager
async def fresh_sandbox(image: str, *, run_id: str, files: dict[str, bytes]) -> AsyncIterator[FreshSandbox]:
    """A new container of `image` with `files` in /workspace; removed when the block ends.

    Args:
        image: the image's tag or id.
        run_id: the run it works for (the container's `assay.run_id` label).
        files: relative path → bytes, written to /workspace.
    """
    facts = await asyncio.to_thread(_facts, image)
    sandbox = await asyncio.to_thread(
        Sandbox.create,
        _engine(),
        facts,
        labels={RUN_LABEL: run_id or "unknown", "assay.role": "scorer"},
        limits=Limits(),
    )
    try:
        if files:
            await asyncio.to_thread(sandbox.put_files, WORKSPACE, files)
        yield FreshSandbox(sandbox)
    finally:
        await asyncio.to_thread(sandbox.remove)
