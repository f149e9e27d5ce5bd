"""What every agent adapter is made of (`Adapter`), what reading its stream gives (`AgentReport`),
and the JSON-lines reader the stream parsers share (`Stream`, `step`, `text`)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from assay.calls.pinning import model_pin_problem
from assay.spec.targets import AgentSpec, ParserName

_TOKEN_KINDS = ("input", "output", "cached", "cache_write", "reasoning")


@dataclass(frozen=True, slots=True)
class AgentReport:
    """What an agent's output said. A figure the stream did not give is None, never 0.

    Args:
        final_report: the agent's last answer; None when it did not finish or ended in error.
        input_tokens: all input tokens, cached ones included (as `assay.calls.accounting` counts them).
        output_tokens: output tokens.
        cached_tokens: the part of `input_tokens` read from the provider's prompt cache.
        cache_write_tokens: the part of `input_tokens` written to the provider's prompt cache.
        reasoning_tokens: the part of `output_tokens` that was reasoning.
        cost_usd: the cost the agent CLI reported (caller-reported, not measured by Assay).
        turns: agent-loop turns the CLI reported.
        tool_calls: tool calls seen in the stream.
        trajectory: steps shaped as the harness protocol's (`role`, `content`, `tool_calls`; a
            tool result also has `tool_call_id` and `is_error`).
        problems: what was wrong with the stream, for people (lines that were not JSON, no
            result event, an error the agent reported).
    """

    final_report: str | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None
    reasoning_tokens: int | None = None
    cost_usd: float | None = None
    turns: int | None = None
    tool_calls: int | None = None
    trajectory: list[dict[str, Any]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def reserved_tokens(self) -> dict[str, Any] | None:
        """The token counts the stream reported, as a target's caller-reported (reserved) figures:
        kept apart from measured ones."""
        tokens = {
            kind: getattr(self, f"{kind}_tokens")
            for kind in _TOKEN_KINDS
            if getattr(self, f"{kind}_tokens") is not None
        }
        return {"tokens": tokens} if tokens else None

    def since(self, before: AgentReport, totals: frozenset[str]) -> AgentReport:
        """This report with the `totals` fields made this run's own: a resumed conversation's
        CLI reports those as the conversation's totals, so the figures of `before` (the totals
        last known) are taken off. A total that went down cannot be split: it becomes None,
        with a problem saying so."""
        changes: dict[str, Any] = {}
        problems = list(self.problems)
        for name in totals:
            now, then = getattr(self, name), getattr(before, name)
            if now is None or then is None:
                continue
            if now < then:
                problems.append(f"{name} went down after the resume ({then} → {now}): not split")
                changes[name] = None
            else:
                changes[name] = round(now - then, 10) if isinstance(now, float) else now - then
        return replace(self, **changes, problems=problems)

    def latest_totals(self, before: AgentReport | None, totals: frozenset[str]) -> AgentReport:
        """The conversation's totals as last known after this run: this report's where it has
        them, else `before`'s (a run that reported none leaves the last known ones)."""
        if before is None:
            return self
        return replace(self, **{n: getattr(before, n) for n in totals if getattr(self, n) is None})

    def metadata(self) -> dict[str, Any]:
        """The turns, tool calls and problems the stream gave, as a target's caller metadata."""
        return {
            k: getattr(self, k)
            for k in ("turns", "tool_calls", "problems")
            if getattr(self, k) not in (None, [])
        }


@dataclass(frozen=True, slots=True)
class KeyProbe:
    """How one cheap request tells whether a provider key works (`assay run --check-keys`):
    `GET <base>/<path>` (listing models costs nothing) with the key.

    Args:
        key: the host variable holding the key.
        base_url_env: the variable that points the CLI at another endpoint, if set.
        base_url: the provider's endpoint otherwise.
        path: appended to the base URL.
        header: `authorization` (sent as `Bearer <key>`) or the header the key goes in.
        headers: other headers the provider wants.
    """

    key: str
    base_url_env: str
    base_url: str
    path: str
    header: str = "authorization"
    headers: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Adapter:
    """One agent CLI: how it starts and what it needs.

    Args:
        name: the spec's `agent.adapter`.
        command: its default argv template (`{prompt}`, `{model}`, `{prompt_file}`), or None when
            the spec must give one.
        parser: how its stdout is read unless `agent.parser` says otherwise.
        provider_keys: the host variables it needs, passed as secrets.
        needs_model: `agent.model` is required.
        version_command: how its version is asked in the image at preflight (recorded on the run
            as the target snapshot's `agent_version`); None when it has no CLI of its own.
        egress_hosts: its provider's endpoint, added to `target.egress` when there is one (as the
            seed, quickstudy, adds an adapter's `egressHosts`).
        key_probe: how `--check-keys` tries its provider key; None when it has none.
        resume_command: the argv template that continues the agent's own conversation in the
            same container (a session's `resume`); None when the agent has no such line (a
            `resume` then runs `command` again: `$ASSAY_TURN_METHOD` says it is a resume).
        resume_totals: the report's fields that, after a resume, are the whole conversation's
            totals rather than the run's (`AgentReport.since` makes them the run's own).
        key_names: the variable each provider key has inside the container, when the CLI reads
            it under another name than the host's (Codex reads `CODEX_API_KEY`).
        settings: the agent's plain environment and the files it reads under `$HOME` (its own
            configuration), for a spec; secrets are never among them.
        model_problem: why `agent.model` is not a pin for this CLI (None: it is).
        stop_event: a stream event after which the run is stopped at once, with the failure it
            means (a CLI that would retry a refused key for minutes): the event's reason, or None.
    """

    name: str
    command: tuple[str, ...] | None
    parser: ParserName
    provider_keys: tuple[str, ...]
    needs_model: bool
    version_command: tuple[str, ...] | None = None
    egress_hosts: tuple[str, ...] = ()
    key_probe: KeyProbe | None = None
    resume_command: tuple[str, ...] | None = None
    resume_totals: frozenset[str] = frozenset()
    key_names: tuple[tuple[str, str], ...] = ()
    settings: Callable[[AgentSpec], AgentSettings] | None = None
    model_problem: Callable[[str], str | None] = model_pin_problem
    stop_event: Callable[[dict[str, Any]], Stop | None] | None = None


@dataclass(frozen=True, slots=True)
class AgentSettings:
    """What an adapter sets up for its CLI, from the spec (never a secret).

    Args:
        env: plain environment variables.
        home_files: files written under the agent's `$HOME` before it runs (path relative to
            it → text), e.g. Codex's `.codex/config.toml`.
    """

    env: dict[str, str] = field(default_factory=dict)
    home_files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Stop:
    """Why a run was stopped mid-stream (`Adapter.stop_event`).

    Args:
        message: the failure, for people (names the variable, never its value).
        http_status: the provider's status behind it, if any.
    """

    message: str
    http_status: int | None = None


Parser = Callable[[str], AgentReport]


class StopWatch:
    """Reads an agent's stdout as it comes (`feed`, chunk by chunk) and says when an event in it
    means the run must stop at once (`Adapter.stop_event`); `stop` is then why."""

    def __init__(self, stop_event: Callable[[dict[str, Any]], Stop | None]) -> None:
        self._stop_event = stop_event
        self._pending = b""
        self.stop: Stop | None = None

    def feed(self, chunk: bytes) -> bool:
        """Whether the run must stop, now that `chunk` came."""
        if self.stop is not None:
            return True
        *lines, self._pending = (self._pending + chunk).split(b"\n")
        for line in lines:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict) and (found := self._stop_event(event)) is not None:
                self.stop = found
                return True
        return False


class Stream:
    """A JSON-lines stream's objects, and what was wrong with its lines."""

    def __init__(self, stdout: str) -> None:
        self.events: list[dict[str, Any]] = []
        self.problems: list[str] = []
        bad: list[int] = []
        # Split on "\n" only: str.splitlines would also split at U+2028, which JSON strings may hold raw.
        lines = stdout.split("\n")
        for number, line in enumerate(lines, start=1):
            line = line.rstrip("\r")
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                event = None
            if isinstance(event, dict):
                self.events.append(event)
            else:
                bad.append(number)
        if bad:
            what = (
                "1 line was not a JSON object" if len(bad) == 1 else f"{len(bad)} lines were not JSON objects"
            )
            self.problems.append(f"{what} (first: line {bad[0]})")
            last = max((n for n, line in enumerate(lines, start=1) if line.strip()), default=0)
            if bad[-1] == last and not stdout.endswith("\n"):
                self.problems.append(f"the last line ({last}) is cut off: the stream ended mid-line")

    def count(self, value: Any, what: str) -> int | None:
        """A token or turn count: a non-negative integer, else None (and a problem if present)."""
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        self.problems.append(f"{what} is not a count: {value!r:.40}")
        return None

    def amount(self, value: Any, what: str) -> float | None:
        if value is None:
            return None
        if (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and math.isfinite(value)
            and value >= 0
        ):
            return float(value)
        self.problems.append(f"{what} is not an amount in USD: {value!r:.40}")
        return None


def step(
    role: str, content: Any, tool_calls: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    return {"role": role, "content": content, "tool_calls": tool_calls or [], **extra}


def message_text(value: Any) -> str | None:
    """A message's text: a string, or the text blocks of a list of content blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [b["text"] for b in value if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(texts) if texts else None
    return None
