"""What every agent adapter is made of (`Adapter`), what reading its stream gives (`AgentReport`),
and the JSON-lines reader the stream parsers share (`Stream`, `step`, `text`)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from assay.spec.targets import ParserName


@dataclass(frozen=True, slots=True)
class AgentReport:
    """What an agent's output said. A figure the stream did not give is None, never 0.

    Args:
        final_report: the agent's last answer; None when it did not finish or ended in error.
        input_tokens: all input tokens, cached ones included (as `assay.calls.accounting` counts them).
        output_tokens: output tokens.
        cached_tokens: the part of `input_tokens` read from the provider's prompt cache.
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
            for kind in ("input", "output", "cached")
            if getattr(self, f"{kind}_tokens") is not None
        }
        return {"tokens": tokens} if tokens else None

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


Parser = Callable[[str], AgentReport]


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
