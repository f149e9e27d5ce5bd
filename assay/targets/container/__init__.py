"""The `container` target: one fresh, isolated container per item x trial.

An attempt, always in this order (docs/sandbox.md):

    provision   create and start the container; fixtures → /workspace, prompt → /assay
    agent       the scripted command or the agent adapter, with its deadline
    transcript  stdout and stderr saved to the store's artifacts, redacted — even after a
                timeout or a failure
    export      what the agent left running killed, the workspace read and saved to the store's
                artifacts, redacted (file and folder names too)
    diff        the workspace against the fixtures it started from (redacted)
    scoring     the executor runs the scorers while the container lives; the eval's checks are
                copied to /assay/checks only now, after the agent has finished. When the agent
                damaged its container (an export or the checks' copy failed in it), the checks
                run in a fresh container of the same image over the exported workspace instead
                (a separate verifier): what the agent did to its sandbox is its own result
    teardown    last; its failure is recorded on the item and never masks the result

`begin()` runs provision → export and returns a `ContainerAttempt`; the executor scores it and
calls `close()`. A timeout or a non-zero exit is a failed attempt (data, with its transcript);
there is nothing to score then.

One concern a module; only `fixtures` and this kind need no Docker, so a run without containers
never loads the Docker SDK (the others are imported when a container run prepares or opens):

    fixtures    an item's fixture and checks folders (their files are part of the run's identity)
    preflight   `prepare_container`: every problem at once, the image resolved to its id
    target      `ContainerAgent`: provisioning and the attempt's stages
    attempt     `AttemptState` (what an attempt made, its teardown) and `ContainerAttempt`
    workspace   export, diff and keeping the workspace, redacted
    verifier    `LiveSandbox` (what scorers exec in) and `Verifier` (checks in; a fresh verifier)
    session     `ContainerSession`: a policy's attempt in one live container, and its `Box`
    agents/     the agent adapters: cli, claude_code, codex
    keys        `assay run --check-keys`: each agent adapter's provider key tried before a container starts
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from assay.spec import ContainerTarget
from assay.spec.dataset import Item
from assay.targets._base import Target
from assay.targets._kind import TargetContext, TargetKind
from assay.targets.container.fixtures import fixture_files


class ContainerKind(TargetKind[ContainerTarget]):
    """`kind: container`: preflight asks the engine for the image (and the adapter for its
    problems); the fixture folders' files are part of the run's identity; attempts stay alive
    while they are scored; a policy drives each attempt in its own live container."""

    name = "container"
    makes_containers = True
    live_attempts = True

    def prepare(
        self, spec: ContainerTarget, items: list[Item], spec_dir: Path, stored: dict[str, Any] | None
    ) -> dict[str, Any]:
        from assay.targets.container.preflight import prepare_container  # loads the Docker SDK

        return prepare_container(spec, items, spec_dir, stored)

    def key_problems(self, spec: ContainerTarget) -> list[str]:
        from assay.targets.container.keys import key_problems

        return key_problems(spec)

    def fixture_files(self, spec: ContainerTarget, items: list[Item], spec_dir: Path) -> list[Path]:
        return fixture_files(spec, items, spec_dir)

    def open(self, spec: ContainerTarget, context: TargetContext) -> Target:
        from assay.targets.container.target import ContainerAgent  # loads the Docker SDK

        return ContainerAgent(
            spec,
            snapshot=context.snapshot or {},
            concurrency=context.concurrency,
            store=context.store,
            run_id=context.run_id or "",
            spec_dir=Path(context.spec_dir or "."),
            redact=context.redact,
        )
