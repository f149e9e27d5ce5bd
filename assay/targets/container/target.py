"""The `container` target (`ContainerAgent`): provisioning and one attempt's lifecycle, stage by
stage (the order is the package's docstring's). The workspace's export and diff are
`workspace`'s, readying the sandbox for scorers is `verifier`'s, an attempt's evidence and
teardown `attempt`'s."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from assay.calls.capture import Redactor
from assay.errors import StageTimeout, TargetFailure
from assay.outcomes import FailureKind
from assay.sandbox import (
    CONTROL,
    RUN_LABEL,
    WORKSPACE,
    ImageFacts,
    Limits,
    Sandbox,
    client,
    folder_files,
    start_egress,
)
from assay.spec import ContainerTarget
from assay.spec.dataset import Item
from assay.store import Store
from assay.targets._base import TargetResult, render
from assay.targets.container import workspace
from assay.targets.container.agents import (
    AgentReport,
    agent_settings,
    command_line,
    container_secrets,
    env_file_text,
    parse_stream,
    parser_name,
    secret_values,
    stop_watch,
)
from assay.targets.container.attempt import (
    AttemptState,
    ContainerAttempt,
    fresh_folder,
    ms_since,
)
from assay.targets.container.fixtures import folder
from assay.targets.container.preflight import egress_allowlist
from assay.targets.container.session import ContainerSession
from assay.targets.container.verifier import LiveSandbox, Verifier

PROMPT_FILE = f"{CONTROL}/prompt.txt"
# The agent's $HOME: writable (a tmpfs) and outside the workspace, so a CLI's own state and
# configuration never show in the diff.
HOME = "/tmp"
_ENV_FILE = "/tmp/.assay-env"
# Reads the 0600 env file into the environment, deletes it, then runs the command: secrets never
# appear in argv, in `docker inspect`, or in the agent's workspace.
_WITH_SECRETS = (
    f'if [ -f {_ENV_FILE} ]; then while IFS= read -r line; do export "$line"; done < {_ENV_FILE}; '
    f'rm -f {_ENV_FILE}; fi; exec "$@"'
)
_STDERR_IN_ERROR = 2000


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
            self.secret_values.update(secret_values(spec.agent, os.environ))
        self.redactor = Redactor([v for v in self.secret_values.values() if v], redact or [])
        self._engine = client()
        self._verifier = Verifier(self._engine, self.facts, self.limits, run_id, self._run, self.redactor)
        # Every blocking engine call of every live attempt needs a thread; the default pool
        # (cores + 4) would queue attempts behind each other.
        self._spare: asyncio.Future[Sandbox] | None = None
        self._pool = ThreadPoolExecutor(max_workers=2 * concurrency + 4, thread_name_prefix="assay-sandbox")

    async def _run(self, function: Any, *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, lambda: function(*args, **kwargs))

    offload = _run  # what the attempt's parts run blocking engine calls with

    @property
    def reads_files(self) -> bool:
        """Whether an answer is a file the agent left (`output: file:<path>`)."""
        return self.spec.output.startswith("file:")

    async def open_session(self, item: Item, trial: int, attempt: int) -> ContainerSession:
        """A managed session's attempt (docs/sessions.md): a fresh container, provisioned, its
        files kept in `<item>/<trial>/attempt-<n>/`. Never raises for the sandbox's or the
        engine's faults: they are the session's `failure`."""
        folder = self.store.artifacts_dir(self.run_id, item.item_id, trial)
        if attempt == 1:  # a killed earlier try of this item left attempts' folders
            await self._run(fresh_folder, folder)
        session = ContainerSession(self, item, await self.attempt_state(folder / f"attempt-{attempt}"))
        await session.open()
        return session

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
        state = await self.attempt_state(self.store.artifacts_dir(self.run_id, item.item_id, trial))
        try:
            return await self._stages(item, state)
        except TargetFailure as failure:
            return state.attempt_failed(failure)
        except Exception as exc:  # noqa: BLE001 - an engine or sandbox fault is data, not a crash
            return state.failed(f"sandbox error: {type(exc).__name__}: {exc}", FailureKind.EXCEPTION)

    async def attempt_state(self, folder: Path) -> AttemptState:
        """A new attempt's state over an emptied artifacts `folder`."""
        await self._run(fresh_folder, folder)  # a killed earlier try of this attempt left files
        return AttemptState(
            folder,
            image=self.facts,
            artifacts_root=self.store.artifacts_root,
            redactor=self.redactor,
            cleanup_seconds=self.spec.deadlines.cleanup,
            offload=self._run,
        )

    async def _stages(self, item: Item, state: AttemptState) -> ContainerAttempt:
        prompt = render(self.spec.prompt, item)
        await self.provision(item, prompt, state)
        stdout, report = await self.agent_stage(state, self.argv(prompt), self.environment())
        files = await self.export_stage(state)
        output = self.output_of(stdout, files, report, state)
        await self.keep_trajectory(state, report.trajectory if report is not None else None)
        return self.alive(item, state, prompt, self.turn_result(output, report, state))

    async def keep_trajectory(self, state: AttemptState, steps: list[dict[str, Any]] | None) -> None:
        """The steps read from the agent's (redacted) stream, kept as `trajectory.json` — what a
        rescore's scorers read and `assay trajectories export` writes as ATIF."""
        if steps:
            document = json.dumps({"status": "valid", "steps": steps}, ensure_ascii=False, default=str)
            await self._run(state.save, "trajectory.json", document.encode())

    async def provision(self, item: Item, prompt: str, state: AttemptState) -> None:
        """The provision stage, under its deadline (`TargetFailure`, kind `timeout`, past it)."""
        started = time.perf_counter()
        try:
            await self._deadline(
                "provision", self.spec.deadlines.provision, self._provision(item, prompt, state)
            )
        except StageTimeout as exc:
            raise state.failure(str(exc), FailureKind.TIMEOUT) from None
        finally:
            state.timings["provision"] = ms_since(started)

    async def agent_stage(
        self, state: AttemptState, argv: list[str], environment: dict[str, str], turn: int | None = None
    ) -> tuple[str, AgentReport | None]:
        """Run the agent (or the command) once in the live container, its transcript kept
        whatever happens; returns its redacted stdout and the report read from it.

        Args:
            state: the attempt.
            argv: the command line (secrets reach it through the env file only).
            environment: its plain variables.
            turn: a session's prompt index: its transcript is `transcript-<turn>.txt`.

        Raises:
            TargetFailure: the agent timed out (kind `timeout`) or exited non-zero (`exception`).
        """
        deadline = self.spec.deadlines.agent
        started = time.perf_counter()
        watch = stop_watch(self.spec.agent) if self.spec.agent is not None else None
        outcome = await self._run(
            state.sandbox.exec,
            ["sh", "-c", _WITH_SECRETS, "assay", *argv],
            timeout=deadline,
            environment=environment,
            watch=watch.feed if watch is not None else None,
        )
        state.timings["agent"] = state.timings.get("agent", 0.0) + ms_since(started)
        state.facts["exit_code"] = outcome.exit_code
        # -- transcript: always, whatever happened ----------------------------------------------
        stdout = self.redactor.text(outcome.stdout.decode("utf-8", "replace"))
        stderr = self.redactor.text(outcome.stderr.decode("utf-8", "replace"))
        suffix = "" if turn is None else f"-{turn}"
        await self._run(state.save, f"transcript{suffix}.txt", stdout.encode())
        await self._run(state.save, f"stderr{suffix}.txt", stderr.encode())
        if state.egress is not None:
            # The agent is done, so its denied destinations are all known: hostnames only.
            await state.keep_egress_evidence()
        if outcome.stopped and watch is not None and watch.stop is not None:
            # An event the agent would only retry for minutes (a refused key): stopped at the first.
            raise state.failure(
                f"the agent was stopped: {watch.stop.message}", FailureKind.HTTP, watch.stop.http_status
            )
        if outcome.timed_out:
            raise state.failure(f"incomplete attempt: {StageTimeout('agent', deadline)}", FailureKind.TIMEOUT)
        if outcome.exit_code != 0:
            tail = stderr.strip()[-_STDERR_IN_ERROR:]
            raise state.failure(
                f"command exited {outcome.exit_code}: {tail or '(no stderr)'}", FailureKind.EXCEPTION
            )
        report = parse_stream(parser_name(self.spec.agent), stdout) if self.spec.agent is not None else None
        return stdout, report

    async def export_stage(self, state: AttemptState) -> dict[str, bytes]:
        """Diff and export, the container still alive: the workspace kept (redacted); returns it.

        Raises:
            TargetFailure: the export's deadline passed (kind `timeout`).
        """
        started = time.perf_counter()
        try:
            files = await self._deadline(
                "export", self.spec.deadlines.export, workspace.export(state, self._run)
            )
        except StageTimeout as exc:
            raise state.failure(str(exc), FailureKind.TIMEOUT) from None
        state.workspace = await self._run(workspace.keep, state, files, self.redactor, self.secret_values)
        state.timings["export"] = ms_since(started)
        return files

    def turn_result(
        self, output: Any, report: AgentReport | None, state: AttemptState | None
    ) -> TargetResult:
        """What one run of the agent answered: its output and what its stream reported, with the
        attempt's files and facts when `state` is given (a session's prompt has none yet)."""
        return TargetResult(
            output=self.redactor.text(output) if isinstance(output, str) else output,
            model=getattr(self.spec.agent, "model", None),
            wire_ms=state.timings["agent"] if state is not None else None,
            caller_cost=getattr(report, "cost_usd", None),
            caller_metadata=report.metadata() if report is not None else None,
            # Token counts the agent's own stream reported: kept apart from measured figures.
            caller_reserved=report.reserved_tokens() if report is not None else None,
            artifacts=state.relative() if state is not None else None,
            sandbox=state.facts if state is not None else None,
            trajectory=getattr(report, "trajectory", None) or None,
            steps=len(report.trajectory) if report is not None and report.trajectory else None,
            tool_calls=getattr(report, "tool_calls", None),
        )

    def alive(self, item: Item, state: AttemptState, prompt: str, result: TargetResult) -> ContainerAttempt:
        """The attempt handed to the executor alive: scored, then closed (torn down)."""
        sandbox = state.sandbox
        assert sandbox is not None
        live = LiveSandbox(sandbox, self._run, self.redactor)

        async def before_scoring() -> None:
            state.scoring_started = time.perf_counter()
            checks = None
            if self.spec.checks is not None:
                checks = await self._run(folder_files, folder(self.spec.checks, item, self.spec_dir))
            await self._verifier.prepare(state, live, prompt, checks)

        return ContainerAttempt(
            result,
            None,
            {"workspace": state.workspace, "sandbox": live},
            self.spec.deadlines.scoring,
            facts=state.facts,
            _close=state.teardown,
            _before_scoring=before_scoring,
        )

    def output_of(
        self, stdout: str, files: dict[str, bytes], report: AgentReport | None, state: AttemptState
    ) -> Any:
        """The answer of one run of the agent (`target.output`).

        Raises:
            TargetFailure: the answer is not there (kind `protocol`).
        """
        try:
            return self._output(stdout, files, report)
        except KeyError as exc:
            raise state.failure(f"output {self.spec.output!r}: {exc.args[0]}", FailureKind.PROTOCOL) from None

    async def _provision(self, item: Item, prompt: str, state: AttemptState) -> None:
        """Egress (if any), the container, the fixtures, the prompt and the secrets; what exists is
        on `state` as soon as it does, so a failure or a deadline still tears it down."""
        labels = {RUN_LABEL: self.run_id, "assay.role": "attempt"}
        if self.spec.egress:
            # A fresh name per attempt: a resumed or retried attempt never meets an old network.
            state.egress = await self._run(
                start_egress,
                self._engine,
                self.run_id,
                f"{item.item_index}-{uuid.uuid4().hex[:8]}",
                egress_allowlist(self.spec),
                self.spec.egress_proxy_image,
                labels,
                upstream_network=self.spec.egress_network,
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
            state.baseline = await self._run(folder_files, folder(self.spec.fixtures, item, self.spec_dir))
        if state.baseline:
            await self._run(state.sandbox.put_files, WORKSPACE, state.baseline)
        await self.put_prompt(state, prompt)
        await self.put_secrets(state)
        await self._put_settings(state)

    async def _put_settings(self, state: AttemptState) -> None:
        """The CLI's own configuration files under its $HOME (Codex's endpoint), as its user."""
        if self.spec.agent is None:
            return
        files = agent_settings(self.spec.agent).home_files
        if files:
            assert state.sandbox is not None
            encoded = {name: text.encode() for name, text in files.items()}
            await self._run(state.sandbox.put_files, HOME, encoded)

    async def put_prompt(self, state: AttemptState, prompt: str) -> None:
        """The prompt file (`$ASSAY_PROMPT_FILE`), written as Assay's control user."""
        assert state.sandbox is not None
        await self._run(state.sandbox.put_files, CONTROL, {"prompt.txt": prompt.encode()}, control=True)

    async def put_secrets(self, state: AttemptState) -> None:
        """The 0600 env file the next command's preamble reads and deletes (so each run of the
        agent needs it written again)."""
        assert state.sandbox is not None
        secrets = {k: v for k, v in self.secret_values.items() if v}
        if self.spec.agent is not None:
            secrets = container_secrets(self.spec.agent, secrets)
        if state.egress is not None:
            secrets.update(state.egress.proxy_env())
        if secrets:
            env_file = env_file_text(secrets).encode()
            await self._run(state.sandbox.put_files, "/tmp", {".assay-env": env_file}, mode=0o600)

    async def _deadline(self, stage: str, seconds: float, work: Any) -> Any:
        try:
            return await asyncio.wait_for(work, seconds)
        except TimeoutError:
            raise StageTimeout(stage, seconds) from None

    def argv(self, prompt: str, *, resume: bool = False) -> list[str]:
        """The command line for `prompt` (`resume`: a session's later prompt)."""
        if self.spec.agent is not None:
            return command_line(self.spec.agent, prompt, PROMPT_FILE, resume=resume)
        return [part.replace("{prompt}", prompt) for part in self.spec.command or []]

    def environment(self, **extra: str) -> dict[str, str]:
        """The command's plain variables (`extra`: a session's turn variables)."""
        agent_env = dict(getattr(self.spec.agent, "env", None) or {})
        # The adapter's own settings last: the endpoint and no other traffic, whatever env says.
        adapter_env = agent_settings(self.spec.agent).env if self.spec.agent is not None else {}
        return {
            **agent_env,
            **self.spec.env,
            **adapter_env,
            "ASSAY_PROMPT_FILE": PROMPT_FILE,
            "HOME": HOME,
            **extra,
        }

    def _output(self, stdout: str, files: dict[str, bytes], report: AgentReport | None) -> Any:
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
