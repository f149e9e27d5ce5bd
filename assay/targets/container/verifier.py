"""Where an attempt's scorers run: `LiveSandbox`, what a scorer sees of the attempt's container,
and `Verifier`, which puts the eval's checks in it once the agent has finished — or, when the
agent damaged its own container (an export or the checks' copy failed in it), makes a fresh
container of the same image over the exported workspace and runs every check there instead (a
separate verifier): what the agent did to its sandbox is its own result, never the checks'."""

from __future__ import annotations

import dataclasses
from typing import Any

import docker.errors

from assay.calls.capture import Redactor
from assay.errors import SandboxError
from assay.sandbox import CONTROL, RUN_LABEL, WORKSPACE, ExecResult, ImageFacts, Limits, Sandbox, folder_files
from assay.targets.container.attempt import AttemptState, Offload
from assay.targets.container.workspace import redacted_bytes

CHECKS_DIR = f"{CONTROL}/checks"


class LiveSandbox:
    """What a scorer sees of the attempt's container (`Sample.sandbox`): `await exec(argv)`.

    Args:
        sandbox: the container.
        run: how blocking calls are run off the event loop.
        redactor: the attempt's secrets and patterns, kept out of what a scorer sees.

    Attributes:
        verifier: None while the attempt's own container is used; else where the checks run
            instead and why (`{"container": "fresh", "reason": …}`), which a scorer records.
    """

    def __init__(self, sandbox: Sandbox, run: Offload, redactor: Redactor) -> None:
        self._sandbox = sandbox
        self._run = run
        self._redactor = redactor
        self.verifier: dict[str, str] | None = None

    def use(self, sandbox: Sandbox, verifier: dict[str, str]) -> None:
        """Run every later command in `sandbox`, the fresh verifier `verifier` describes."""
        self._sandbox = sandbox
        self.verifier = verifier

    async def exec(
        self,
        argv: list[str],
        *,
        timeout: float | None = None,
        workdir: str = WORKSPACE,
        as_root: bool = False,
    ) -> ExecResult:
        """Run `argv` in the live container (as the attempt's user unless `as_root`); its output
        comes back redacted (a scorer keeps it in its metadata)."""
        result = await self._run(
            self._sandbox.exec, argv, timeout=timeout, workdir=workdir, user="0" if as_root else None
        )
        return dataclasses.replace(
            result,
            stdout=redacted_bytes(result.stdout, self._redactor),
            stderr=redacted_bytes(result.stderr, self._redactor),
        )

    async def put_files(self, folder: str, files: dict[str, bytes], *, replace: bool = False) -> None:
        """Write files (relative path → bytes) under `folder`, as Assay's control user (`replace`:
        whatever was there is removed first)."""
        await self._run(self._sandbox.put_files, folder, files, control=True, replace=replace)


class Verifier:
    """Readies an attempt's sandbox for its scorers.

    Args:
        engine: the Docker client.
        image: the run's image (a fresh verifier is of the same image).
        limits: the attempt's resource limits (a fresh verifier gets the same).
        run_id: the run's id (the verifier's `assay.run_id` label).
        offload: how blocking calls run off the event loop.
        redactor: the attempt's secrets and patterns (the damage's reason may quote them).
    """

    def __init__(
        self,
        engine: Any,
        image: ImageFacts,
        limits: Limits,
        run_id: str,
        offload: Offload,
        redactor: Redactor,
    ) -> None:
        self._engine = engine
        self._image = image
        self._limits = limits
        self._run_id = run_id
        self._offload = offload
        self._redactor = redactor

    async def prepare(
        self, state: AttemptState, live: LiveSandbox, prompt: str, checks: dict[str, bytes] | None
    ) -> None:
        """Copy the checks (if the eval has any) to /assay/checks of the attempt's container —
        whatever was at that path is gone first: only the eval's checks are trusted; a container
        the agent damaged is replaced by a fresh verifier.

        Raises:
            SandboxError: a fresh verifier was needed and could not be made.
        """
        if state.damaged is None and checks is not None:
            try:
                await live.put_files(CHECKS_DIR, checks or {".keep": b""}, replace=True)
            except (SandboxError, docker.errors.APIError) as exc:
                state.damaged = f"copying the checks in failed: {exc}"
        if state.damaged is not None:
            await self._fresh(state, live, prompt, checks)

    async def _fresh(
        self, state: AttemptState, live: LiveSandbox, prompt: str, checks: dict[str, bytes] | None
    ) -> None:
        """A separate verifier: a fresh container of the same image and limits with the exported
        workspace, the prompt and the checks, in which every scorer's command runs from now on.

        Raises:
            SandboxError: the fresh container could not be made (an engine fault: the scorers
                fail, as for any sandbox that cannot be prepared).
        """
        # The reason may quote the container's stderr, and through it names the agent chose.
        why = self._redactor.text(state.damaged or "")
        state.facts["verifier"] = verifier = {"container": "fresh", "reason": why}
        try:
            workspace = await self._offload(folder_files, state.folder / "workspace")
            labels = {RUN_LABEL: self._run_id, "assay.role": "verifier"}
            state.verifier = await self._offload(
                Sandbox.create, self._engine, self._image, labels=labels, limits=self._limits
            )
            if workspace:
                await self._offload(state.verifier.put_files, WORKSPACE, workspace)
            control = {"prompt.txt": prompt.encode()}
            if checks is not None:
                control.update({f"checks/{name}": data for name, data in (checks or {".keep": b""}).items()})
            await self._offload(state.verifier.put_files, CONTROL, control, control=True)
        except Exception as exc:
            raise SandboxError(
                f"the attempt's container was damaged ({why}) and a fresh verifier could not be made: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        live.use(state.verifier, verifier)
