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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import difflib
import json
import os
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker.errors

from assay.calls.capture import Redactor
from assay.errors import SandboxError, SpecError, StageTimeout, TargetFailure
from assay.outcomes import FailureKind
from assay.sandbox._docker import (
    CONTROL,
    RUN_LABEL,
    WORKSPACE,
    ExecResult,
    ImageFacts,
    Limits,
    Sandbox,
    client,
    folder_files,
    inspect_image,
)
from assay.spec import ContainerTarget
from assay.spec.dataset import Item
from assay.store import Store
from assay.targets._base import TargetResult
from assay.targets.openai import render

PROMPT_FILE = f"{CONTROL}/prompt.txt"
CHECKS_DIR = f"{CONTROL}/checks"
_ENV_FILE = "/tmp/.assay-env"
# Reads the 0600 env file into the environment, deletes it, then runs the command: secrets never
# appear in argv, in `docker inspect`, or in the agent's workspace.
_WITH_SECRETS = (
    f'if [ -f {_ENV_FILE} ]; then while IFS= read -r line; do export "$line"; done < {_ENV_FILE}; '
    f'rm -f {_ENV_FILE}; fi; exec "$@"'
)
_STDERR_IN_ERROR = 2000


def prepare_container(
    spec: ContainerTarget, items: list[Item], spec_dir: Path, stored: dict[str, Any] | None
) -> dict[str, Any]:
    """Preflight, before any container starts; returns the run's target snapshot.

    The image is resolved to its id once (a resumed run uses the stored id, so a tag moved since
    does not change what runs); every problem — a missing image (Docker's own message), a missing
    secret or fixture folder, an agent adapter's problems — is reported at once.

    Raises:
        SpecError: naming each problem's field.
    """
    problems = []
    for name in spec.secrets:
        value = os.environ.get(name)
        if not value:
            problems.append(f"target.secrets: environment variable {name!r} is not set")
        elif any(c in value for c in "\r\n\0"):
            problems.append(f"target.secrets: {name}'s value holds a line break or NUL; it cannot be passed")
    problems += _egress_problems(spec)
    for field_name, template in (("fixtures", spec.fixtures), ("checks", spec.checks)):
        if template is None:
            continue
        for item in items:
            folder = _folder(template, item, spec_dir)
            if folder is None or not folder.is_dir():
                problems.append(
                    f"target.{field_name}: item {item.item_index} (id {item.item_id!r}): "
                    f"no folder {template!r} → {str(folder) if folder else 'unfillable, or outside the spec folder'}"
                )
                break
    problems += _agent_problems(spec)
    if spec.egress and spec.egress_proxy_image and stored is None:
        problems += _image_problems("target.egress_proxy_image", spec.egress_proxy_image)
    facts: ImageFacts | None = None
    if stored is not None:
        facts = ImageFacts(**stored["image"])
    else:
        try:
            facts = inspect_image(client(), spec.image, spec.user)
        except docker.errors.ImageNotFound as exc:
            problems.append(f"target.image: {exc.explanation or exc}")
        except docker.errors.DockerException as exc:
            problems.append(f"target.image: the Docker engine did not answer: {exc}")
        except ValueError as exc:
            problems.append(f"target.user: {exc}")
    if problems:
        raise SpecError(problems)
    assert facts is not None
    return {"image": dataclasses.asdict(facts)}


def _egress_problems(spec: ContainerTarget) -> list[str]:
    if not spec.egress:
        return []
    from assay.sandbox.egress import allowlist_problems

    return [f"target.egress: {problem}" for problem in allowlist_problems(list(spec.egress))]


def _image_problems(where: str, image: str) -> list[str]:
    try:
        engine = client()
        try:
            engine.images.get(image)
        finally:
            engine.close()
    except docker.errors.ImageNotFound as exc:
        return [f"{where}: {exc.explanation or exc}"]
    except docker.errors.DockerException as exc:
        return [f"{where}: the Docker engine did not answer: {exc}"]
    return []


def _agent_problems(spec: ContainerTarget) -> list[str]:
    if spec.agent is None:
        return []
    from assay.targets.agents import preflight

    return [f"target.{problem}" for problem in preflight(spec.agent, os.environ)]


def _folder(template: str, item: Item, spec_dir: Path) -> Path | None:
    """The folder a template names for an item; None when it cannot be filled or leaves the
    spec's folder (an item's fields are data: `../..` must not copy the machine into a sandbox)."""
    try:
        folder = (spec_dir / render(template, item)).resolve()
    except (KeyError, IndexError, ValueError):
        return None
    return folder if folder.is_relative_to(spec_dir.resolve()) else None


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

    def __init__(self, sandbox: Sandbox, run: Any, redactor: Redactor) -> None:
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
            stdout=_redacted_bytes(result.stdout, self._redactor),
            stderr=_redacted_bytes(result.stderr, self._redactor),
        )

    async def put_files(self, folder: str, files: dict[str, bytes], *, replace: bool = False) -> None:
        """Write files (relative path → bytes) under `folder`, as Assay's control user (`replace`:
        whatever was there is removed first)."""
        await self._run(self._sandbox.put_files, folder, files, control=True, replace=replace)


class _AttemptState:
    """What one attempt has made so far (its container, its egress, its kept files), so that a
    failure at any stage can still be recorded with its evidence and torn down.

    Args:
        agent: the target.
        folder: the attempt's artifacts folder.
    """

    def __init__(self, agent: ContainerAgent, folder: Path) -> None:
        self.agent = agent
        self.folder = folder
        self.kept: list[str] = []
        self.timings: dict[str, float] = {}
        self.facts: dict[str, Any] = {
            "image": agent.facts.tag,
            "image_id": agent.facts.image_id,
            "user": agent.facts.user,
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

    def save(self, name: str, data: bytes) -> None:
        (self.folder / name).write_bytes(data)
        self.kept.append(name)

    def relative(self) -> list[str]:
        """The kept files as `items.artifacts` lists them (relative to `<store>/artifacts`)."""
        root = self.agent.store.artifacts_root
        return [(self.folder / name).relative_to(root).as_posix() for name in self.kept]

    def failed(self, message: str, kind: FailureKind) -> ContainerAttempt:
        failure = TargetFailure(
            self.agent.redactor.text(message),
            kind=kind,
            provider=f"container:{self.agent.facts.tag}",
            artifacts=self.relative(),
            sandbox=self.facts,
        )
        return ContainerAttempt(None, failure, facts=self.facts, _close=self.teardown)

    async def teardown(self) -> str | None:
        """Remove the container, then the egress sidecar and network, each on its own (one
        failing does not leave the other); returns what failed, or None."""
        started = time.perf_counter()
        if self.scoring_started is not None:
            self.timings["scoring"] = _ms(self.scoring_started)
        seconds = self.agent.spec.deadlines.cleanup
        errors = []
        for part in (self.sandbox, self.verifier, self.egress):
            if part is None:
                continue
            try:
                await asyncio.wait_for(self.agent._run(_teardown_of(part)), seconds)
            except TimeoutError:
                errors.append(str(StageTimeout("cleanup", seconds)))
            except Exception as exc:  # noqa: BLE001 - recorded on the item, never masks its result
                errors.append(f"teardown failed: {type(exc).__name__}: {exc}")
        self.timings["cleanup"] = _ms(started)
        return "; ".join(errors) or None


def _teardown_of(part: Any) -> Any:
    return part.remove if isinstance(part, Sandbox) else part.teardown


def _fresh_folder(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)


class ContainerAgent:
    """The `container` target.

    Args:
        spec: the target spec.
        snapshot: the run's target snapshot (`prepare_container`).
        concurrency: the run's concurrency (containers alive at once).
        store: where artifacts go.
        run_id: the run's id (every container carries it as the `assay.run_id` label).
        spec_dir: the spec's folder (fixtures and checks are relative to it).
        redact: patterns never stored (the spec's `redact:`).
    """

    instrumented = False

    def __init__(
        self,
        spec: ContainerTarget,
        *,
        snapshot: dict[str, Any],
        concurrency: int,
        store: Store,
        run_id: str,
        spec_dir: Path,
        redact: list[str] | None = None,
    ) -> None:
        self.spec = spec
        self.facts = ImageFacts(**snapshot["image"])
        self.store = store
        self.run_id = run_id
        self.spec_dir = spec_dir
        self.limits = Limits(**spec.limits.model_dump())
        self.secret_values = {name: os.environ.get(name, "") for name in spec.secrets}
        if spec.agent is not None:
            from assay.targets.agents import secret_values

            self.secret_values.update(secret_values(spec.agent, os.environ))
        self.redactor = Redactor([v for v in self.secret_values.values() if v], redact or [])
        self._engine = client()
        # Every blocking engine call of every live attempt needs a thread; the default pool
        # (cores + 4) would queue attempts behind each other.
        self._spare: asyncio.Future[Sandbox] | None = None
        self._pool = ThreadPoolExecutor(max_workers=2 * concurrency + 4, thread_name_prefix="assay-sandbox")

    async def _run(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: function(*args, **kwargs))

    async def __call__(self, item: Item, trial: int) -> TargetResult:
        """Run an attempt without scorers (the executor uses `begin` to score it alive)."""
        attempt = await self.begin(item, trial)
        try:
            if attempt.failure is not None:
                raise attempt.failure
            assert attempt.result is not None
            return attempt.result
        finally:
            await attempt.close()

    async def begin(self, item: Item, trial: int) -> ContainerAttempt:
        """Provision, run, save the transcript, diff and export; the sandbox stays alive. Never
        raises for the sandbox's or the engine's faults: they are a failed attempt."""
        folder = self.store.artifacts_dir(self.run_id, item.item_id, trial)
        await self._run(_fresh_folder, folder)  # a killed earlier try of this attempt left files
        state = _AttemptState(self, folder)
        try:
            return await self._stages(item, trial, state)
        except Exception as exc:  # noqa: BLE001 - an engine or sandbox fault is data, not a crash
            return state.failed(f"sandbox error: {type(exc).__name__}: {exc}", FailureKind.EXCEPTION)

    async def _stages(self, item: Item, trial: int, state: _AttemptState) -> ContainerAttempt:
        deadlines = self.spec.deadlines
        timings = state.timings
        prompt = render(self.spec.prompt, item)
        # -- provision ------------------------------------------------------------------------
        started = time.perf_counter()
        try:
            await self._deadline("provision", deadlines.provision, self._provision(item, prompt, state))
        except StageTimeout as exc:
            return state.failed(str(exc), FailureKind.TIMEOUT)
        finally:
            timings["provision"] = _ms(started)
        sandbox = state.sandbox
        assert sandbox is not None
        # -- agent ------------------------------------------------------------------------------
        started = time.perf_counter()
        outcome = await self._run(
            sandbox.exec,
            ["sh", "-c", _WITH_SECRETS, "assay", *self._argv(prompt)],
            timeout=deadlines.agent,
            environment=self._environment(),
        )
        timings["agent"] = _ms(started)
        state.facts["exit_code"] = outcome.exit_code
        # -- transcript: always, whatever happened ----------------------------------------------
        stdout = self.redactor.text(outcome.stdout.decode("utf-8", "replace"))
        stderr = self.redactor.text(outcome.stderr.decode("utf-8", "replace"))
        await self._run(state.save, "transcript.txt", stdout.encode())
        await self._run(state.save, "stderr.txt", stderr.encode())
        if state.egress is not None:
            # The agent is done, so its denied destinations are all known: hostnames only.
            denials = await self._run(state.egress.denials)
            # A denied hostname can carry a secret (`<token>.example.com` is a way out).
            denied = json.dumps(self.redactor.value(denials), indent=1)
            await self._run(state.save, "egress-denials.json", denied.encode())
            state.facts["egress_denied"] = len(denials)
        if outcome.timed_out:
            return state.failed(
                f"incomplete attempt: {StageTimeout('agent', deadlines.agent)}", FailureKind.TIMEOUT
            )
        if outcome.exit_code != 0:
            tail = stderr.strip()[-_STDERR_IN_ERROR:]
            return state.failed(
                f"command exited {outcome.exit_code}: {tail or '(no stderr)'}", FailureKind.EXCEPTION
            )
        # -- diff and export, the container still alive --------------------------------------------
        started = time.perf_counter()
        try:
            files = await self._deadline("export", deadlines.export, self._export(state))
        except StageTimeout as exc:
            return state.failed(str(exc), FailureKind.TIMEOUT)
        workspace = await self._run(self._keep_workspace, state, files)
        timings["export"] = _ms(started)
        report = None
        if self.spec.agent is not None:
            from assay.targets.agents import parse_stream, parser_name

            # The redacted stream: its report and trajectory reach the store and scorers.
            report = parse_stream(parser_name(self.spec.agent), stdout)
        try:
            output = self._output(stdout, files, report)
        except KeyError as exc:
            return state.failed(f"output {self.spec.output!r}: {exc.args[0]}", FailureKind.PROTOCOL)
        result = TargetResult(
            output=self.redactor.text(output) if isinstance(output, str) else output,
            model=getattr(self.spec.agent, "model", None),
            wire_ms=timings["agent"],
            caller_cost=getattr(report, "cost_usd", None),
            caller_metadata=_report_metadata(report),
            # Token counts the agent's own stream reported: kept apart from measured figures.
            caller_reserved=_report_tokens(report),
            artifacts=state.relative(),
            sandbox=state.facts,
            trajectory=getattr(report, "trajectory", None) or None,
            steps=len(report.trajectory) if report is not None and report.trajectory else None,
            tool_calls=getattr(report, "tool_calls", None),
        )
        live = LiveSandbox(sandbox, self._run, self.redactor)

        async def before_scoring() -> None:
            state.scoring_started = time.perf_counter()
            checks = None
            if self.spec.checks is not None:
                checks = await self._run(folder_files, _folder(self.spec.checks, item, self.spec_dir))
            if state.damaged is None and checks is not None:
                try:
                    # Whatever was at that path is gone first: only the eval's checks are trusted.
                    await live.put_files(CHECKS_DIR, checks or {".keep": b""}, replace=True)
                except (SandboxError, docker.errors.APIError) as exc:
                    state.damaged = f"copying the checks in failed: {exc}"
            if state.damaged is not None:
                await self._verify_fresh(state, live, prompt, checks)

        return ContainerAttempt(
            result,
            None,
            {"workspace": workspace, "sandbox": live},
            deadlines.scoring,
            facts=state.facts,
            _close=state.teardown,
            _before_scoring=before_scoring,
        )

    async def _export(self, state: _AttemptState) -> dict[str, bytes]:
        """The workspace, read once the agent's processes are gone (`Sandbox.export`). If that
        fails in the container (the agent filled its memory with files in /tmp, say), the
        container is marked damaged and the export tried once more with headroom for Assay's own
        commands."""
        sandbox = state.sandbox
        assert sandbox is not None
        try:
            return await self._run(sandbox.export, WORKSPACE)
        except (SandboxError, docker.errors.APIError) as exc:
            state.damaged = f"exporting the workspace failed: {exc}"
        await self._run(sandbox.add_headroom)
        return await self._run(sandbox.export, WORKSPACE)

    async def _verify_fresh(
        self, state: _AttemptState, live: LiveSandbox, prompt: str, checks: dict[str, bytes] | None
    ) -> None:
        """A separate verifier: a fresh container of the same image and limits with the exported
        workspace, the prompt and the checks, in which every scorer's command runs from now on.

        Raises:
            SandboxError: the fresh container could not be made (an engine fault: the scorers
                fail, as for any sandbox that cannot be prepared).
        """
        # The reason may quote the container's stderr, and through it names the agent chose.
        why = self.redactor.text(state.damaged or "")
        state.facts["verifier"] = verifier = {"container": "fresh", "reason": why}
        try:
            workspace = await self._run(folder_files, state.folder / "workspace")
            labels = {RUN_LABEL: self.run_id, "assay.role": "verifier"}
            state.verifier = await self._run(
                Sandbox.create, self._engine, self.facts, labels=labels, limits=self.limits
            )
            if workspace:
                await self._run(state.verifier.put_files, WORKSPACE, workspace)
            control = {"prompt.txt": prompt.encode()}
            if checks is not None:
                control.update({f"checks/{name}": data for name, data in (checks or {".keep": b""}).items()})
            await self._run(state.verifier.put_files, CONTROL, control, control=True)
        except Exception as exc:
            raise SandboxError(
                f"the attempt's container was damaged ({why}) and a fresh verifier could not be made: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        live.use(state.verifier, verifier)

    def _keep_workspace(self, state: _AttemptState, files: dict[str, bytes]) -> Path:
        """The diff and the exported workspace into the attempt's folder (a thread), redacted:
        contents, and names too — a file or folder named after a secret is stored under the
        redacted name, listed in the attempt's `redacted_names`."""
        names = self.redactor.paths([*state.baseline, *files])
        renamed = sorted(names[name] for name in files if names[name] != name)
        if renamed:
            state.facts["redacted_names"] = renamed
        before = {names[name]: data for name, data in state.baseline.items()}
        after = {names[name]: data for name, data in files.items()}
        state.save("diff.patch", self.redactor.text(workspace_diff(before, after)).encode())
        workspace = state.folder / "workspace"
        for name, data in after.items():
            path = workspace / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(_redacted_bytes(data, self.redactor, self.secret_values))
        state.kept.append("workspace")
        return workspace

    async def _provision(self, item: Item, prompt: str, state: _AttemptState) -> None:
        """Egress (if any), the container, the fixtures, the prompt and the secrets; what exists is
        on `state` as soon as it does, so a failure or a deadline still tears it down."""
        labels = {RUN_LABEL: self.run_id, "assay.role": "attempt"}
        if self.spec.egress:
            from assay.sandbox.egress import start_egress

            # A fresh name per attempt: a resumed or retried attempt never meets an old network.
            state.egress = await self._run(
                start_egress,
                self._engine,
                self.run_id,
                f"{item.item_index}-{uuid.uuid4().hex[:8]}",
                list(self.spec.egress),
                self.spec.egress_proxy_image,
                labels,
            )
        if state.egress is None:
            state.sandbox = await self._take_spare()
        else:
            state.sandbox = await self._run(
                Sandbox.create,
                self._engine,
                self.facts,
                labels=labels,
                limits=self.limits,
                network=state.egress.network,
                dns=["127.0.0.1"],
            )
        if self.spec.fixtures:
            state.baseline = await self._run(folder_files, _folder(self.spec.fixtures, item, self.spec_dir))
        if state.baseline:
            await self._run(state.sandbox.put_files, WORKSPACE, state.baseline)
        await self._run(state.sandbox.put_files, CONTROL, {"prompt.txt": prompt.encode()}, control=True)
        secrets = {k: v for k, v in self.secret_values.items() if v}
        if state.egress is not None:
            secrets.update(state.egress.proxy_env())
        if secrets:
            await self._run(state.sandbox.put_files, "/tmp", {".assay-env": env_file(secrets)}, mode=0o600)

    async def _deadline(self, stage: str, seconds: float, work: Any) -> Any:
        try:
            return await asyncio.wait_for(work, seconds)
        except TimeoutError:
            raise StageTimeout(stage, seconds) from None

    def _argv(self, prompt: str) -> list[str]:
        if self.spec.agent is not None:
            from assay.targets.agents import command_line

            return command_line(self.spec.agent, prompt, PROMPT_FILE)
        return [part.replace("{prompt}", prompt) for part in self.spec.command or []]

    def _environment(self) -> dict[str, str]:
        agent_env = dict(getattr(self.spec.agent, "env", None) or {})
        return {**agent_env, **self.spec.env, "ASSAY_PROMPT_FILE": PROMPT_FILE, "HOME": "/tmp"}

    def _output(self, stdout: str, files: dict[str, bytes], report: Any) -> Any:
        if self.spec.output == "stdout":
            return stdout.rstrip("\n")
        if self.spec.output == "report":
            if report is None or report.final_report is None:
                raise KeyError("the agent's stream has no final report")
            return report.final_report
        name = self.spec.output.removeprefix("file:").lstrip("/").removeprefix("workspace/")
        if name not in files:
            raise KeyError(f"the attempt left no file {name!r} in /workspace")
        return files[name].decode("utf-8", "replace")

    async def _take_spare(self) -> Sandbox:
        """A fresh container, started ahead of its attempt: the one started while the previous
        attempt ran, if any; and the next is started now. No attempt ever gets a used container;
        starting one (a few hundred ms) just stops being on the attempt's path."""
        spare, self._spare = self._spare, None
        self._spare = asyncio.ensure_future(self._new_attempt_container())
        if spare is not None:
            # A spare that failed to start: its attempt tries once more, now.
            with contextlib.suppress(Exception):
                return await spare
        return await self._new_attempt_container()

    async def _new_attempt_container(self) -> Sandbox:
        labels = {RUN_LABEL: self.run_id, "assay.role": "attempt"}
        return await self._run(Sandbox.create, self._engine, self.facts, labels=labels, limits=self.limits)

    async def aclose(self) -> None:
        if self._spare is not None:
            spare, self._spare = self._spare, None
            # On failure, the run's end removes every container of the run anyway.
            with contextlib.suppress(Exception):
                await self._run((await spare).remove)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._engine.close()


def env_file(values: dict[str, str]) -> bytes:
    """The env file's bytes (`agents.env_file_text`: checked, one `KEY=value` per line)."""
    from assay.targets.agents import env_file_text

    return env_file_text(values).encode()


def workspace_diff(before: dict[str, bytes], after: dict[str, bytes]) -> str:
    """A unified diff of two workspaces (relative path → bytes); binary files named only."""
    chunks = []
    for name in sorted(before.keys() | after.keys()):
        old, new = before.get(name), after.get(name)
        if old == new:
            continue
        try:
            old_lines = old.decode().splitlines(keepends=True) if old is not None else []
            new_lines = new.decode().splitlines(keepends=True) if new is not None else []
        except UnicodeDecodeError:
            chunks.append(f"Binary files a/{name} and b/{name} differ\n")
            continue
        for line in difflib.unified_diff(
            old_lines,
            new_lines,
            "/dev/null" if old is None else f"a/{name}",
            "/dev/null" if new is None else f"b/{name}",
        ):
            # Any line of a file's end without a newline (old side, new side or both) says so.
            chunks.append(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n")
    return "".join(chunks)


def _redacted_bytes(data: bytes, redactor: Redactor, secrets: dict[str, str] | None = None) -> bytes:
    """Text through the redactor; binary data with each secret's bytes replaced."""
    try:
        return redactor.text(data.decode()).encode()
    except UnicodeDecodeError:
        for value in (secrets or {}).values():
            if value:
                data = data.replace(value.encode(), b"[REDACTED]")
        return data


def _report_tokens(report: Any) -> dict[str, Any] | None:
    if report is None:
        return None
    tokens = {
        kind: getattr(report, f"{kind}_tokens")
        for kind in ("input", "output", "cached")
        if getattr(report, f"{kind}_tokens") is not None
    }
    return {"tokens": tokens} if tokens else None


def _report_metadata(report: Any) -> dict[str, Any] | None:
    if report is None:
        return None
    keys = ("turns", "tool_calls", "problems")
    return {k: getattr(report, k) for k in keys if getattr(report, k, None) not in (None, [])}


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
