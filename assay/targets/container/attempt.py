"""One attempt of the `container` target: what it has made so far (`AttemptState`: container,
egress, kept files, timings) so that a failure at any stage is still recorded with its evidence
and torn down, and what the executor gets back (`ContainerAttempt`)."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from assay.calls.capture import Redactor
from assay.errors import EgressError, StageTimeout, TargetFailure
from assay.outcomes import FailureKind
from assay.sandbox import ImageFacts, Sandbox
from assay.targets._base import TargetResult

# Runs a blocking call (the Docker SDK's) off the event loop: `await offload(function, *args)`.
Offload = Callable[..., Awaitable[Any]]


@dataclass
class ContainerAttempt:
    """One attempt after its agent stage: the result (or failure) and the live sandbox.

    Args:
        result: the completed attempt's result, or None.
        failure: why it failed (a timeout, a non-zero exit, a sandbox problem), or None.
        sample_context: `Sample` fields for the scorers (workspace folder, live sandbox).
        scoring_deadline: seconds the scorers may take together.
        facts: the attempt's `items.sandbox` facts; complete (scoring and cleanup timings) once
            closed.
    """

    result: TargetResult | None
    failure: TargetFailure | None
    sample_context: dict[str, Any] = field(default_factory=dict)
    scoring_deadline: float | None = None
    facts: dict[str, Any] | None = None
    _close: Any = None
    _before_scoring: Any = None

    async def before_scoring(self) -> None:
        """Copy the eval's checks in: only now, after the agent has finished."""
        if self._before_scoring is not None:
            await self._before_scoring()

    async def close(self) -> str | None:
        """Tear the sandbox down; returns why that failed, or None."""
        return await self._close() if self._close is not None else None


class AttemptState:
    """What one attempt has made so far (its container, its egress, its kept files), so that a
    failure at any stage can still be recorded with its evidence and torn down.

    Args:
        folder: the attempt's artifacts folder.
        image: the run's image.
        artifacts_root: the store's artifacts folder (kept files are listed relative to it).
        redactor: the attempt's secrets and patterns, kept out of its failure's message.
        cleanup_seconds: the cleanup stage's deadline.
        offload: how blocking calls run off the event loop.
    """

    def __init__(
        self,
        folder: Path,
        *,
        image: ImageFacts,
        artifacts_root: Path,
        redactor: Redactor,
        cleanup_seconds: float,
        offload: Offload,
    ) -> None:
        self.folder = folder
        self.image = image
        self._artifacts_root = artifacts_root
        self._redactor = redactor
        self._cleanup_seconds = cleanup_seconds
        self._offload = offload
        self.kept: list[str] = []
        self.workspace: Path | None = None  # the kept workspace, once exported
        self.timings: dict[str, float] = {}
        self.facts: dict[str, Any] = {
            "image": image.tag,
            "image_id": image.image_id,
            "user": image.user,
            "stage_ms": self.timings,
        }
        self.sandbox: Sandbox | None = None
        self.egress: Any = None
        # Why the attempt's container cannot be trusted for scoring (set by a failure in it after
        # the agent); then `verifier` is the fresh container the checks run in.
        self.damaged: str | None = None
        self.verifier: Sandbox | None = None
        self.baseline: dict[str, bytes] = {}
        self.scoring_started: float | None = None
        # Problems met along the way that are not the attempt's failure (evidence that could not
        # be read): reported with the teardown's, in `items.teardown_error`.
        self.notes: list[str] = []

    def save(self, name: str, data: bytes) -> None:
        """Keep a file in the attempt's folder (a later save of the same name replaces it)."""
        (self.folder / name).write_bytes(data)
        if name not in self.kept:
            self.kept.append(name)

    def relative(self) -> list[str]:
        """The kept files as `items.artifacts` lists them (relative to `<store>/artifacts`)."""
        return [(self.folder / name).relative_to(self._artifacts_root).as_posix() for name in self.kept]

    def failure(self, message: str, kind: FailureKind, http_status: int | None = None) -> TargetFailure:
        """The attempt's failure (redacted), with what it kept so far."""
        return TargetFailure(
            self._redactor.text(message),
            kind=kind,
            http_status=http_status,
            provider=f"container:{self.image.tag}",
            artifacts=self.relative(),
            sandbox=self.facts,
        )

    def failed(self, message: str, kind: FailureKind) -> ContainerAttempt:
        return self.attempt_failed(self.failure(message, kind))

    def attempt_failed(self, failure: TargetFailure) -> ContainerAttempt:
        """The attempt ended by `failure`: nothing to score, only its teardown."""
        return ContainerAttempt(None, failure, facts=self.facts, _close=self.teardown)

    async def keep_egress_evidence(self) -> None:
        """Keep what the agent was refused (`egress-denials.json`, hostnames only, redacted). As in
        the seed, evidence that cannot be read is a teardown note, never a failed attempt: the
        agent's work stands whatever the sidecar's log does."""
        try:
            denials = await self._offload(self.egress.denials)
        except EgressError as error:
            self.notes.append(f"egress evidence unavailable: {error}")
            return
        # A denied hostname can carry a secret (`<token>.example.com` is a way out).
        denied = json.dumps(self._redactor.value(denials), indent=1)
        await self._offload(self.save, "egress-denials.json", denied.encode())
        self.facts["egress_denied"] = len(denials)

    async def teardown(self) -> str | None:
        """Remove the container, then the egress sidecar and network, each on its own (one
        failing does not leave the other); returns what failed (and the notes taken on the way),
        or None."""
        started = time.perf_counter()
        if self.scoring_started is not None:
            self.timings["scoring"] = ms_since(self.scoring_started)
        seconds = self._cleanup_seconds
        errors = []
        for part in (self.sandbox, self.verifier, self.egress):
            if part is None:
                continue
            try:
                await asyncio.wait_for(self._offload(_teardown_of(part)), seconds)
            except TimeoutError:
                errors.append(str(StageTimeout("cleanup", seconds)))
            except Exception as exc:  # noqa: BLE001 - recorded on the item, never masks its result
                errors.append(f"teardown failed: {type(exc).__name__}: {exc}")
        self.timings["cleanup"] = ms_since(started)
        return "; ".join(self.notes + errors) or None


def _teardown_of(part: Any) -> Any:
    return part.remove if isinstance(part, Sandbox) else part.teardown


def fresh_folder(folder: Path) -> None:
    """An empty artifacts folder for the attempt (a killed earlier try of it left files)."""
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)


def ms_since(started: float) -> float:
    """Milliseconds since `started` (a `time.perf_counter()`), to a tenth."""
    return round((time.perf_counter() - started) * 1000, 1)
