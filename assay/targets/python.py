"""The `python` target: a user's function, sync or async."""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from assay.errors import TargetFailure
from assay.evaluators._imports import import_callable, resolve_callable
from assay.outcomes import FailureKind
from assay.spec import PythonTarget
from assay.spec.dataset import Item
from assay.targets._base import SessionState, TargetResult
from assay.targets._kind import TargetContext, TargetKind

# Optional keyword arguments a target function may declare to receive more than the input.
_OPTIONAL_ARGS = ("fields", "annotations", "item_id", "trial", "seed", "history", "session_id")
_STRUCTURED_KEYS = {"output", "cost", "metadata"}
# Metadata keys that look like measurements: kept apart, so nobody mistakes them for measured
# figures. Assay's own, and the seed's (@axlsdk/eval's RESERVED_METADATA_KEYS), so code written for
# the seed keeps its counts out of the plain metadata here too.
RESERVED_METADATA = frozenset(
    {"model", "models", "tokens", "usage", "cost", "cost_usd", "input_tokens", "output_tokens"}
    | {"modelCallCounts", "workflows", "workflowCallCounts", "agentCalls"}
)
_log = logging.getLogger(__name__)


class PythonKind(TargetKind[PythonTarget]):
    """`kind: python`: the function must import from the spec's folder before anything runs."""

    name = "python"

    def problems(self, spec: PythonTarget, spec_dir: Path, where: str) -> list[str]:
        try:
            resolve_callable(spec.function, str(spec_dir))
        except (ValueError, TypeError) as exc:
            return [f"{where}.function: {exc}"]
        return []

    def open(self, spec: PythonTarget, context: TargetContext) -> PythonFunctionTarget:
        return PythonFunctionTarget(
            spec, concurrency=context.concurrency, seed=context.seed, spec_dir=context.spec_dir
        )


class PythonFunctionTarget:
    """Calls `module:function` with the item's input.

    The function may also declare any of `fields`, `annotations`, `item_id`, `trial`, `seed`, and
    for sessions (docs/sessions.md) `history` (the session's earlier prompts and answers as chat
    messages, `[]` on a first prompt) and `session_id`. In a session it is called once per prompt,
    with the prompt in place of the item's input.
    It returns the output, or a dict with `output` and optionally `cost` (USD) and `metadata`
    (a dict), which are stored as caller-reported figures (one that is not a non-negative number,
    or not a dict, is ignored with a warning). Sync functions run in a thread pool
    as wide as the run's concurrency, so a blocking call does not stall the others.

    Args:
        spec: the target spec.
        concurrency: the run's concurrency (sizes the thread pool).
        seed: the run's seed.
        spec_dir: the spec's folder, made importable.
    """

    instrumented = False

    def __init__(self, spec: PythonTarget, *, concurrency: int, seed: int, spec_dir: str | None) -> None:
        self._function = import_callable(spec.function, spec_dir=spec_dir)
        self._name = spec.function
        self._seed = seed
        self._is_async = inspect.iscoroutinefunction(self._function)
        params = inspect.signature(self._function).parameters
        self._extra = [name for name in _OPTIONAL_ARGS if name in params]
        self._pool = None if self._is_async else ThreadPoolExecutor(max_workers=concurrency)

    def item_prompt(self, item: Item) -> Any:
        return item.input

    async def __call__(self, item: Item, trial: int) -> TargetResult:
        return await self._invoke(item, trial, item.input, None)

    async def turn(self, item: Item, trial: int, prompt: Any, session: SessionState) -> TargetResult:
        return await self._invoke(item, trial, prompt, session)

    async def _invoke(
        self, item: Item, trial: int, prompt: Any, session: SessionState | None
    ) -> TargetResult:
        available = {
            "fields": item.fields,
            "annotations": item.annotations,
            "item_id": item.item_id,
            "trial": trial,
            "seed": self._seed,
            "history": list(session.history) if session is not None else [],
            "session_id": session.session_id if session is not None else None,
        }
        kwargs = {name: available[name] for name in self._extra}
        try:
            if self._is_async:
                answer = await self._function(prompt, **kwargs)
            else:
                loop = asyncio.get_running_loop()
                answer = await loop.run_in_executor(self._pool, lambda: self._function(prompt, **kwargs))
        except Exception as exc:  # the user's code failing is data, not a crash
            # One call, never retried: no attempt failed before it.
            raise TargetFailure(
                f"{type(exc).__name__}: {exc}", kind=FailureKind.EXCEPTION, provider="python", retries=0
            ) from exc
        return _result(answer, self._name)

    async def aclose(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)


def _result(answer: Any, name: str) -> TargetResult:
    if not (isinstance(answer, dict) and "output" in answer and set(answer) <= _STRUCTURED_KEYS):
        return TargetResult(output=answer)
    cost = answer.get("cost")
    metadata = answer.get("metadata")
    # A caller's figure is a report, not a measurement: a bad one is ignored with a warning, and
    # the item (whose output is fine) completes, as in the seed.
    if cost is not None and (
        isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost) or cost < 0
    ):
        _log.warning(
            "ignoring the cost %s reported by %s: expected a non-negative finite number of USD; "
            "measured spend is unaffected",
            _cut(cost),
            name,
        )
        cost = None
    if metadata is not None and not isinstance(metadata, dict):
        _log.warning(
            "ignoring the metadata reported by %s: expected a dict, got %s", name, type(metadata).__name__
        )
        metadata = None
    reserved = {k: v for k, v in (metadata or {}).items() if k in RESERVED_METADATA}
    plain = {k: v for k, v in (metadata or {}).items() if k not in RESERVED_METADATA}
    return TargetResult(
        output=answer["output"],
        caller_cost=cost,
        caller_metadata=plain or None,
        caller_reserved=reserved or None,
    )


def _cut(value: Any) -> str:
    """A reported value for a log line, cut to 200 characters."""
    text = repr(value)
    return text if len(text) <= 200 else text[:197] + "..."
