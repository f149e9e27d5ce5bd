"""The live side of an `llm_judge` scorer: the clients it calls its model through, opened from its
spec as a chat target's client is (`assay.targets._chat.ChatTarget`).

The spec (`LlmJudge`) is what the YAML gave: validated, frozen, compared, hashed into the run's
identity, pickled to a Dask worker. Its clients are live: connections that belong to the event
loop that opened them. So a judge's clients are opened on the loop of its first score — one
`JudgeClients` per loop, with one batcher per run in batch mode — and closed with that loop
(`asyncio.run` closes them before it closes the loop itself).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncGenerator, Callable
from typing import Any, Protocol

from assay.calls.batch import Batcher
from assay.calls.batch_mode import open_batcher
from assay.calls.chat import ChatClient
from assay.calls.endpoint import ModelEndpoint
from assay.calls.keys import key_problems
from assay.calls.rate import controller_for
from assay.calls.wire import ChatAPI


class JudgeSpec(Protocol):
    """What the live clients read from a judge's spec (besides its `ModelEndpoint` fields)."""

    name: str
    model: str
    concurrency: int
    cache: bool | str
    batch: Any


class JudgeClients:
    """A judge's clients on one event loop: the chat client of its endpoint, and in batch mode a
    batcher per run, re-attached to that run's recorded judge batches.

    Args:
        spec: the judge's spec (its endpoint, model, `concurrency`, `cache`, `batch`).
        api: the chat API its model speaks.
    """

    def __init__(self, spec: JudgeSpec, api: ChatAPI) -> None:
        endpoint: ModelEndpoint = spec  # type: ignore[assignment]
        self._spec, self._api = spec, api
        self.chat = ChatClient(
            endpoint,
            api=api,
            concurrency=spec.concurrency,
            cache=bool(spec.cache),
            # The judge's account may be the target's: its calls share that endpoint's window.
            gate=controller_for(endpoint, spec.model, spec.concurrency, opens_run=False),
        )
        self.batchers: dict[str | None, Batcher] = {}

    def batcher(self, store: Any, run_id: str | None) -> Batcher:
        """The batcher of the run `run_id` (its ledger the run's `batches/` in `store`)."""
        batcher = self.batchers.get(run_id)
        if batcher is None:
            batcher = self.batchers[run_id] = open_batcher(
                self._spec, self._api, store=store, run_id=run_id or None, scorer=self._spec.name
            )
        return batcher

    async def aclose(self) -> None:
        for batcher in self.batchers.values():  # a batch in flight stays recorded, to re-attach to
            await batcher.aclose()
        await self.chat.aclose()


class LiveClients:
    """A judge's `JudgeClients`, one per event loop, each closed with its loop. Held by the spec
    as a private attribute: copies and pickles start empty, and it never makes two specs unequal."""

    def __init__(self) -> None:
        self.by_loop: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, tuple[JudgeClients, AsyncGenerator[None]]
        ] = weakref.WeakKeyDictionary()

    def __copy__(self) -> LiveClients:
        return self  # a shallow copy of the spec (a matrix cell) may share them

    def __deepcopy__(self, memo: dict[int, Any]) -> LiveClients:
        return LiveClients()

    def __reduce__(self) -> tuple[type[LiveClients], tuple[()]]:
        return LiveClients, ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LiveClients)

    __hash__ = object.__hash__

    async def opened(self, spec: JudgeSpec, api: ChatAPI) -> JudgeClients:
        """The running loop's clients of `spec`, opened on first use. Raises ValueError when the
        key it names cannot be had."""
        loop = asyncio.get_running_loop()
        held = self.by_loop.get(loop)
        if held is not None:
            return held[0]
        if problems := key_problems(spec, "llm_judge"):
            raise ValueError(problems[0])
        clients = JudgeClients(spec, api)
        by_loop = self.by_loop
        closer = _closed_with_the_loop(clients, lambda: by_loop.pop(loop, None))
        by_loop[loop] = (clients, closer)
        await anext(closer)  # never suspends: registers the closer with the loop
        return clients

    async def aclose(self) -> None:
        """Close the running loop's clients, if it opened any."""
        held = self.by_loop.pop(asyncio.get_running_loop(), None)
        if held is not None:
            await held[1].aclose()


async def _closed_with_the_loop(clients: JudgeClients, forget: Callable[[], object]) -> AsyncGenerator[None]:
    # Started once and left suspended: the loop tracks it, and `asyncio.run` (like any loop
    # calling `shutdown_asyncgens`) closes it before closing itself, running this `finally` while
    # the loop can still close the client's connections cleanly. `forget` drops the clients from
    # their table, which would otherwise keep the closed loop alive (this generator refers to it).
    try:
        yield
    finally:
        forget()
        await clients.aclose()
