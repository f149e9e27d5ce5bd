"""A managed session in a container (docs/sessions.md): one attempt's live container, in which
every prompt of the policy runs the agent again, and `Box`, what the policy runs checks with
between prompts.

    open_session(agent, item, trial, attempt)   provision a fresh container -> ContainerSession
    ContainerSession.turn(...)                  one prompt: the agent run (its resume line after
                                                the first), transcript kept, answer read
    ContainerSession.box.exec(argv)             a command between prompts, as the agent's user
    ContainerSession.finish(result)             export, diff, keep: the attempt handed over alive
    ContainerSession.close()                    teardown, last

As in the seed (agent-bench), the container lives for the whole attempt: the first prompt is the
agent's usual command line, each later one its adapter's resume line (`claude --continue`,
`codex exec resume --last`), or the same command again for `cli` and a scripted `command` (which
read `$ASSAY_TURN_METHOD`). The workspace is exported once, after the policy returned; another
attempt gets a fresh container.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from assay.errors import TargetFailure
from assay.outcomes import FailureKind
from assay.sandbox import WORKSPACE, ExecResult
from assay.spec.dataset import Item
from assay.targets._base import SessionState, TargetResult, render
from assay.targets.container.agents import AgentReport, resume_totals
from assay.targets.container.attempt import AttemptState, ContainerAttempt
from assay.targets.container.verifier import LiveSandbox


class Box:
    """`session.box`: commands in the attempt's live container, between prompts.

    Each runs as the agent's user (never root: Assay's control user owns init and /assay), its
    output captured and redacted, and at most `limit` seconds (the agent stage's deadline): at the
    deadline the output so far comes back with `timed_out` set.

    Args:
        live: the attempt's container.
        limit: the longest a command may run.
    """

    def __init__(self, live: LiveSandbox, limit: float) -> None:
        self._live = live
        self._limit = limit

    async def exec(
        self, argv: list[str], *, timeout: float | None = None, workdir: str = WORKSPACE
    ) -> ExecResult:
        """Run `argv` (no shell unless you run one) and wait for it.

        Args:
            argv: the command, a non-empty list of strings.
            timeout: seconds, at most the agent stage's deadline (its default).
            workdir: where it runs; `/workspace` by default.

        Raises:
            TypeError: `argv` is not a non-empty list of strings.
        """
        if not isinstance(argv, list | tuple) or not argv or not all(isinstance(a, str) for a in argv):
            raise TypeError(f"box.exec(argv): argv must be a non-empty list of strings, not {argv!r:.80}")
        seconds = self._limit if timeout is None else min(float(timeout), self._limit)
        return await self._live.exec(list(argv), timeout=seconds, workdir=workdir)


class ContainerSession:
    """One attempt's session with a `container` target (`assay.targets.SessionTarget`).

    Args:
        agent: the open target.
        item: the item.
        state: the attempt (its folder, its container once provisioned).

    Attributes:
        failure: why provisioning failed (no prompt can be sent), or None.
        box: the policy's `session.box`, once the container runs.
    """

    instrumented = False

    # `agent` is the `ContainerAgent` (`target`, which imports this module: not named here).
    def __init__(self, agent: Any, item: Item, state: AttemptState) -> None:
        self._agent = agent
        self.item = item
        self.state = state
        self.prompt = render(agent.spec.prompt, item)
        self.failure: TargetFailure | None = None
        self.box: Box | None = None
        self._sent = 0
        self._reports: list[AgentReport] = []
        # The conversation's totals as last reported: a resumed CLI reports those, not its run's.
        self._totals: AgentReport | None = None

    def item_prompt(self, item: Item) -> str:
        return self.prompt

    async def __call__(self, item: Item, trial: int) -> TargetResult:
        raise TypeError("a container session answers through turn(); the attempt is the session")

    async def aclose(self) -> None:
        await self.close()

    async def open(self) -> None:
        """Provision the container (its fixtures, the first prompt); a failure is `failure`."""
        try:
            await self._agent.provision(self.item, self.prompt, self.state)
        except TargetFailure as failure:
            self.failure = failure
            return
        except Exception as exc:  # noqa: BLE001 - an engine fault is a failed attempt, not a crash
            self.failure = self.state.failure(
                f"sandbox error: {type(exc).__name__}: {exc}", FailureKind.EXCEPTION
            )
            return
        assert self.state.sandbox is not None
        live = LiveSandbox(self.state.sandbox, self._agent.offload, self._agent.redactor)
        self.box = Box(live, self._agent.spec.deadlines.agent)

    async def turn(self, item: Item, trial: int, prompt: Any, session: SessionState) -> TargetResult:
        """Run the agent on `prompt` in the live container: its command line for the first
        prompt, its resume line after (the session's `session_id`, the prompt's index and
        method in `$ASSAY_SESSION_ID`, `$ASSAY_TURN`, `$ASSAY_TURN_METHOD`).

        Raises:
            TargetFailure: the container is not there, the agent timed out or exited non-zero,
                or its answer is missing.
        """
        if self.failure is not None:
            raise self.failure
        agent, state = self._agent, self.state
        text = prompt if isinstance(prompt, str) else str(prompt)
        index, resume = self._sent, bool(session.history)
        self._sent += 1
        try:
            if index:  # the first prompt's file and secrets went in with the container
                await agent.put_prompt(state, text)
                await agent.put_secrets(state)
            environment = agent.environment(
                ASSAY_SESSION_ID=session.session_id,
                ASSAY_TURN=str(index),
                ASSAY_TURN_METHOD="resume" if resume else "start",
            )
            stdout, report = await agent.agent_stage(
                state, agent.argv(text, resume=resume), environment, turn=index
            )
            files = await agent.offload(state.sandbox.export, WORKSPACE) if agent.reads_files else {}
        except TargetFailure:
            raise
        except Exception as exc:  # an engine fault fails the prompt, not the run
            raise state.failure(f"sandbox error: {type(exc).__name__}: {exc}", FailureKind.EXCEPTION) from exc
        if report is not None:
            report = self._own(report, resume)
        output = agent.output_of(stdout, files, report, state)
        if report is not None:
            self._reports.append(report)
        return agent.turn_result(output, report, None)

    def _own(self, report: AgentReport, resume: bool) -> AgentReport:
        """The prompt's own figures: after a resume, what the conversation's totals grew by
        since the last ones known (so the prompts' sum is the conversation's, never more)."""
        totals = resume_totals(self._agent.spec.agent) if self._agent.spec.agent is not None else frozenset()
        if not totals:
            return report
        own = report.since(self._totals, totals) if resume and self._totals is not None else report
        self._totals = report.latest_totals(self._totals, totals)
        return own

    async def finish(self, result: TargetResult) -> ContainerAttempt:
        """The attempt after its policy: the workspace exported, diffed and kept, the result
        given the attempt's files and facts and the agent's figures over every prompt; alive
        for the scorers. A failure here is the attempt's (nothing to score)."""
        state = self.state
        try:
            await self._agent.export_stage(state)
            await self._agent.keep_trajectory(state, result.trajectory)
        except TargetFailure as failure:
            return state.attempt_failed(failure)
        except Exception as exc:  # noqa: BLE001 - an engine fault is a failed attempt, not a crash
            return state.failed(f"sandbox error: {type(exc).__name__}: {exc}", FailureKind.EXCEPTION)
        reports = self._reports
        tool_calls = [r.tool_calls for r in reports]
        result = dataclasses.replace(
            result,
            wire_ms=state.timings.get("agent"),
            caller_reserved=_summed_tokens(reports),
            artifacts=state.relative(),
            sandbox=state.facts,
            steps=len(result.trajectory) if result.trajectory else None,
            tool_calls=sum(tool_calls) if tool_calls and None not in tool_calls else None,  # type: ignore[arg-type]
        )
        return self._agent.alive(self.item, state, self.prompt, result)

    async def close(self) -> str | None:
        """Tear the container down; returns why that failed, or None."""
        return await self.state.teardown()


def _summed_tokens(reports: list[AgentReport]) -> dict[str, Any] | None:
    """The agent's own token counts over every prompt; a kind some prompt did not report is left
    out (a partial sum would read as the whole)."""
    tokens = [(r.reserved_tokens() or {}).get("tokens", {}) for r in reports]
    if not tokens:
        return None
    kinds = {k for t in tokens for k in t}
    summed = {k: sum(t[k] for t in tokens) for k in sorted(kinds) if all(k in t for t in tokens)}
    return {"tokens": summed} if summed else None
