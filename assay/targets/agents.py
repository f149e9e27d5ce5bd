"""Agent adapters of the `container` target: how an agent CLI starts inside a container, what it
needs from the host, and how its output stream becomes a report.

Pure functions over a spec, a prompt and a stream: nothing here runs Docker or Prefect, so every
rule is unit-tested against recorded streams (tests/data/agent_streams/).

    adapter       default command line                                        provider key
    cli           `command` (a template; required)                            none
    claude-code   claude -p --output-format stream-json --verbose --model M   ANTHROPIC_API_KEY
    codex         codex exec --json --model M                                 OPENAI_API_KEY

A container target uses them in this order:

    preflight(spec, environ)             every problem at once, before any container starts
    secret_values(spec, environ)         the provider keys and `secrets`, read from the host
    env_file_text(values)                the 0600 env file's text: secrets never go in argv
    command_line(spec, prompt, file)     the argv run inside the container
    parse_stream(spec.parser_name, out)  final report, tokens, cost, turns, tool calls, steps

Redacting secrets from the stored transcript is `assay.calls.capture.Redactor`'s job, fed with the
values `secret_values` returned. See docs/agent-adapters.md.
"""

from __future__ import annotations

import json
import math
import re
import string
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, get_args

from assay.errors import InputError, SpecError
from assay.spec.targets import ENV_NAME, AgentSpec, ParserName

PLACEHOLDERS = ("prompt", "model", "prompt_file")

# Characters docker's `--env-file` cannot carry inside a value: it reads one KEY=value per line.
_UNWRITABLE = ("\n", "\r", "\x00")


@dataclass(frozen=True, slots=True)
class _Adapter:
    command: tuple[str, ...] | None
    parser: ParserName
    provider_keys: tuple[str, ...]
    needs_model: bool


# The container is the sandbox, so the CLIs' own permission prompts and sandboxes are switched off:
# headless, a prompt would just deny every tool call, and Codex's Landlock sandbox does not work
# inside most containers. `--` ends the options, so a prompt starting with "-" stays a prompt.
ADAPTERS: dict[str, _Adapter] = {
    "cli": _Adapter(command=None, parser="text", provider_keys=(), needs_model=False),
    "claude-code": _Adapter(
        command=(
            "claude",
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--model",
            "{model}",
            "--dangerously-skip-permissions",
            "--",
            "{prompt}",
        ),
        parser="claude-code",
        provider_keys=("ANTHROPIC_API_KEY",),
        needs_model=True,
    ),
    "codex": _Adapter(
        command=(
            "codex",
            "exec",
            "--json",
            "--model",
            "{model}",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            "--",
            "{prompt}",
        ),
        parser="codex",
        provider_keys=("OPENAI_API_KEY",),
        needs_model=True,
    ),
}


def parser_name(spec: AgentSpec) -> ParserName:
    """`spec.parser`, else the adapter's default (`text` for `cli` and unknown adapters)."""
    if spec.parser is not None:
        return spec.parser
    adapter = ADAPTERS.get(spec.adapter)
    return adapter.parser if adapter else "text"


def secret_names(spec: AgentSpec) -> list[str]:
    """The adapter's provider keys, then `spec.secrets`, each once."""
    adapter = ADAPTERS.get(spec.adapter)
    keys = adapter.provider_keys if adapter else ()
    return list(dict.fromkeys([*keys, *spec.secrets]))


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


# -- the model must be pinned ------------------------------------------------------------------

_MOVING_WORD = re.compile(r"(?:^|[-:/@._])latest(?:$|[-:/@._\[])", re.IGNORECASE)
# Claude Code's own model aliases follow whatever Anthropic currently ships.
_CLAUDE_CODE_ALIASES = frozenset({"default", "sonnet", "opus", "haiku", "opusplan"})
_MONTH_DAY = r"(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])"
_DATE_STAMP = re.compile(
    rf"(?:^|[-@:._/])(?:20\d\d{_MONTH_DAY}|20\d\d-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01]))(?=$|[-@:._/])"
)
# OpenAI's first snapshots carried only month and day: gpt-4-0613, gpt-3.5-turbo-0125.
_OPENAI_MONTH_DAY = re.compile(rf"-{_MONTH_DAY}(?=$|-)")
_ANTHROPIC = re.compile(r"(?:^|[/.:])claude-", re.IGNORECASE)
_OPENAI = re.compile(r"(?:^|[/:])(?:(?:chat)?gpt|codex)-|(?:^|[/:])o\d+(?=$|-)", re.IGNORECASE)


def model_pin_problem(model: str) -> str | None:
    """Why `model` is not pinned to an exact version, or None when it is.

    A moving alias is refused because a moving default is not a valid measurement: two runs of
    the same spec would quietly measure different models. The rule:

    - `latest` as a name or a name's part (`latest`, `claude-3-5-sonnet-latest`, `qwen:latest`)
      and Claude Code's aliases (`sonnet`, `opus`, `haiku`, `opusplan`, `default`) are refused;
    - Anthropic (`claude-…`) and OpenAI (`gpt-…`, `chatgpt-…`, `codex-…`, `o1`, `o3-mini`…)
      names must carry a date stamp, the mark of a snapshot: `YYYYMMDD` (`claude-sonnet-4-20250514`),
      `YYYY-MM-DD` (`gpt-4o-2024-08-06`, `o3-2025-04-16`) or OpenAI's older `MMDD` (`gpt-4-0613`);
    - any other name passes: Assay cannot know every provider's naming, so pin what you can.
    """
    name = model.strip()
    if not name:
        return "is blank"
    if _MOVING_WORD.search(name):
        return f"{model!r} is a moving alias ('latest'); name an exact, dated model version"
    if name.lower().split("[")[0] in _CLAUDE_CODE_ALIASES:
        return (
            f"{model!r} is a Claude Code alias that follows the newest model; name an exact, dated "
            "version such as claude-sonnet-4-20250514"
        )
    if _ANTHROPIC.search(name) and not _DATE_STAMP.search(name):
        return (
            f"{model!r} is not pinned: Anthropic names without a date stamp move to new snapshots; "
            "name a dated version such as claude-sonnet-4-20250514"
        )
    if _OPENAI.search(name) and not (_DATE_STAMP.search(name) or _OPENAI_MONTH_DAY.search(name)):
        return (
            f"{model!r} is not pinned: OpenAI names without a date stamp move to new snapshots; "
            "name a dated snapshot such as gpt-4o-2024-08-06 or o3-2025-04-16"
        )
    return None


# -- before anything starts --------------------------------------------------------------------


def preflight(spec: AgentSpec, environ: Mapping[str, str]) -> list[str]:
    """Every reason the agent cannot run, at once; an empty list when it can. Needs no Docker
    (whether the image exists is the container target's check).

    Args:
        spec: the agent.
        environ: the host environment the secrets are read from (`os.environ`).

    Returns:
        One sentence per problem, each starting with the field (`agent.model …`), so a caller
        can prefix where the agent sits (`target.`). Secret values never appear, only names.
    """
    problems: list[str] = []
    adapter = ADAPTERS.get(spec.adapter)
    if adapter is None:
        problems.append(
            f"agent.adapter {spec.adapter!r} is not a known adapter; known: {', '.join(sorted(ADAPTERS))}"
        )
    used: set[str] = set()
    if spec.command is not None:
        for index, part in enumerate(spec.command):
            try:
                used.update(_placeholders(part))
            except ValueError as exc:
                problems.append(f"agent.command[{index}] {part!r}: {exc}")
    elif adapter is not None and adapter.command is None:
        problems.append(
            f"agent.command is required for the {spec.adapter} adapter: the argv to run, "
            'e.g. ["my-agent", "--task", "{prompt}"]'
        )
    else:
        used.update(PLACEHOLDERS if adapter else ())

    needs_model = (adapter is not None and adapter.needs_model) or "model" in used
    if spec.model is None:
        if needs_model:
            if adapter is not None and adapter.needs_model:
                problems.append(
                    f"agent.model is required by the {spec.adapter} adapter: name an exact, dated model version"
                )
            else:
                problems.append(
                    "agent.model is required: agent.command uses {model}; name an exact model version"
                )
    else:
        reason = model_pin_problem(spec.model)
        if reason:
            problems.append(f"agent.model {reason}")

    keys = adapter.provider_keys if adapter else ()
    missing_keys = [name for name in keys if not environ.get(name)]
    if missing_keys:
        problems.append(
            f"agent.adapter {spec.adapter} needs the provider key variable {', '.join(missing_keys)}, "
            "which is not set (or empty) in the host environment"
        )
    missing = [name for name in spec.secrets if name not in keys and not environ.get(name)]
    if missing:
        problems.append(
            f"agent.secrets names host environment variables that are not set (or empty): {', '.join(missing)}"
        )
    both = sorted(set(spec.env) & set(secret_names(spec)))
    if both:
        problems.append(
            f"agent.env and agent.secrets both name {', '.join(both)}: a variable is either plain or secret"
        )
    return problems


def secret_values(spec: AgentSpec, environ: Mapping[str, str]) -> dict[str, str]:
    """The secrets the container gets, read from the host: the adapter's provider keys and `secrets`.

    Args:
        spec: the agent.
        environ: the host environment (`os.environ`).

    Raises:
        InputError: a variable is not set or empty (names only; `preflight` reports this first).
    """
    names = secret_names(spec)
    missing = [name for name in names if not environ.get(name)]
    if missing:
        raise InputError(f"host environment variables not set (or empty): {', '.join(missing)}")
    return {name: environ[name] for name in names}


def env_file_text(values: Mapping[str, str]) -> str:
    """The env file's text: one `KEY=value` per line, values taken literally (no quotes, no `$`
    expansion). The container target writes it into the attempt's container (mode 0600, owned by
    the attempt's user), where a preamble exports it and deletes it before the command starts.

    Args:
        values: variable name to value.

    Raises:
        InputError: a name is not a variable name, or a value holds a line break or NUL or is
            not valid UTF-8 (each named; values are never shown).
    """
    problems = []
    for name, value in values.items():
        if not ENV_NAME.fullmatch(name):
            problems.append(f"{name!r} is not an environment variable name (letters, digits, _)")
        elif any(c in value for c in _UNWRITABLE):
            problems.append(
                f"the value of {name} holds a line break or NUL: an env-file holds one KEY=value per "
                "line, so it cannot carry that value"
            )
        elif not _utf8(value):
            problems.append(f"the value of {name} is not valid UTF-8")
    if problems:
        raise InputError(problems, source="env-file")
    return "".join(f"{name}={value}\n" for name, value in values.items())


def _utf8(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: os.environ's way of holding undecodable bytes
        return False
    return True


# -- the command line --------------------------------------------------------------------------


def command_line(spec: AgentSpec, prompt: str, prompt_file: str) -> list[str]:
    """The argv run inside the container: the template with its placeholders filled.

    Each argument is filled on its own and nothing goes through a shell, so a prompt is always one
    argument whatever it holds. Secrets are never part of it: they travel in the env-file.

    Args:
        spec: the agent.
        prompt: the item's prompt, for `{prompt}`.
        prompt_file: the prompt file's path inside the container, for `{prompt_file}`.

    Raises:
        SpecError: the adapter is unknown, `cli` has no command, a placeholder is unknown or
            malformed, or `{model}` is used without a model.
    """
    adapter = ADAPTERS.get(spec.adapter)
    if adapter is None:
        raise SpecError(f"agent.adapter {spec.adapter!r} is not a known adapter")
    template = spec.command if spec.command is not None else adapter.command
    if template is None:
        raise SpecError(f"agent.command is required for the {spec.adapter} adapter")
    values = {"prompt": prompt, "model": spec.model, "prompt_file": str(prompt_file)}
    argv = []
    for index, part in enumerate(template):
        where = f"agent.command[{index}] {part!r}"
        try:
            _placeholders(part)
        except ValueError as exc:
            raise SpecError(f"{where}: {exc}") from None
        filled = []
        for literal, name, _, _ in string.Formatter().parse(part):
            filled.append(literal)
            if name is not None:
                value = values[name]
                if value is None:
                    raise SpecError(f"{where}: {{model}} is used but agent.model is not set")
                filled.append(value)
        argv.append("".join(filled))
    return argv


def _placeholders(part: str) -> list[str]:
    """The placeholders in one template argument; ValueError for an unknown or malformed one."""
    try:
        pieces = list(string.Formatter().parse(part))
    except ValueError as exc:  # a single '{' or '}'
        raise ValueError(f"{exc} (write {{{{ or }}}} for a literal brace)") from None
    names = []
    for _, name, spec, conversion in pieces:
        if name is None:
            continue
        known = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
        if name not in PLACEHOLDERS:
            raise ValueError(f"unknown placeholder {{{name}}}; known: {known}")
        if spec or conversion:
            raise ValueError(f"placeholder {{{name}}} takes no format or conversion; known: {known}")
        names.append(name)
    return names


# -- reading the stream ------------------------------------------------------------------------


def parse_stream(parser: ParserName, stdout: str) -> AgentReport:
    """Read an agent's stdout with one of the parsers (docs/agent-adapters.md).

    Never raises on a bad stream: what could not be read is listed in `problems` and the figures
    it would have given stay None.

    Args:
        parser: `claude-code`, `codex`, `jsonl` or `text` (`AgentSpec.parser_name`).
        stdout: everything the agent wrote to stdout.

    Raises:
        ValueError: `parser` is not one of those.
    """
    read = _PARSERS.get(parser)
    if read is None:
        raise ValueError(f"unknown parser {parser!r}; known: {', '.join(get_args(ParserName))}")
    return read(stdout)


class _Stream:
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


def _step(
    role: str, content: Any, tool_calls: list[dict[str, Any]] | None = None, **extra: Any
) -> dict[str, Any]:
    return {"role": role, "content": content, "tool_calls": tool_calls or [], **extra}


def _text(value: Any) -> str | None:
    """A message's text: a string, or the text blocks of a list of content blocks."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        texts = [b["text"] for b in value if isinstance(b, dict) and isinstance(b.get("text"), str)]
        return "\n".join(texts) if texts else None
    return None


def _parse_text(stdout: str) -> AgentReport:
    report = stdout.strip()
    if not report:
        return AgentReport(problems=["the agent wrote nothing to stdout"])
    return AgentReport(final_report=report)


def _parse_jsonl(stdout: str) -> AgentReport:
    """The generic JSON-lines format. The final report is the last object's `result`, `final` or
    `output` string (first of those it has); `usage` ({input_tokens, output_tokens, cached_tokens})
    and `cost_usd` come from the last object carrying them, as run totals; an object with a string
    `role` is a trajectory step."""
    stream = _Stream(stdout)
    final: str | None = None
    usage: dict[str, Any] | None = None
    cost: Any = None
    steps: list[dict[str, Any]] = []
    for event in stream.events:
        text = next((event[k] for k in ("result", "final", "output") if isinstance(event.get(k), str)), None)
        if text is not None:
            final = text
        if isinstance(event.get("usage"), dict):
            usage = event["usage"]
        if "cost_usd" in event:
            cost = event["cost_usd"]
        if isinstance(event.get("role"), str) and event["role"]:
            calls = event.get("tool_calls")
            calls = [c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
            steps.append(_step(event["role"], event.get("content"), calls))
    if final is None:
        stream.problems.append("no object with a `result`, `final` or `output` string: no final report")
    usage = usage or {}
    return AgentReport(
        final_report=final,
        input_tokens=stream.count(usage.get("input_tokens"), "usage.input_tokens"),
        output_tokens=stream.count(usage.get("output_tokens"), "usage.output_tokens"),
        cached_tokens=stream.count(usage.get("cached_tokens"), "usage.cached_tokens"),
        cost_usd=stream.amount(cost, "cost_usd"),
        tool_calls=sum(len(s["tool_calls"]) for s in steps) if steps else None,
        trajectory=steps,
        problems=stream.problems,
    )


def _parse_claude_code(stdout: str) -> AgentReport:
    """Claude Code's `--output-format stream-json --verbose`: `system` (init), `assistant` and
    `user` messages, and one `result` event at the end carrying the run's totals."""
    stream = _Stream(stdout)
    steps: list[dict[str, Any]] = []
    tool_ids: set[str] = set()
    anonymous_calls = 0
    result: dict[str, Any] | None = None
    for event in stream.events:
        kind = event.get("type")
        message = event.get("message") if isinstance(event.get("message"), dict) else {}
        blocks = message.get("content")
        if kind == "assistant":
            blocks = blocks if isinstance(blocks, list) else []
            blocks = [b for b in blocks if isinstance(b, dict)]
            for block in blocks:
                if block.get("type") == "thinking" and isinstance(block.get("thinking"), str):
                    steps.append(_step("reasoning", block["thinking"]))
            calls = [
                {"id": b.get("id"), "name": b.get("name"), "arguments": b.get("input", {})}
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            for call in calls:
                if isinstance(call["id"], str):
                    tool_ids.add(call["id"])
                else:
                    anonymous_calls += 1
            text = _text([b for b in blocks if b.get("type") == "text"])
            if text is not None or calls:
                steps.append(_step("assistant", text, calls))
        elif kind == "user":
            if isinstance(blocks, list):
                for block in blocks:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        steps.append(
                            _step(
                                "tool",
                                _text(block.get("content")),
                                tool_call_id=block.get("tool_use_id"),
                                is_error=block.get("is_error") is True,
                            )
                        )
                text = _text([b for b in blocks if isinstance(b, dict) and b.get("type") == "text"])
                if text is not None:
                    steps.append(_step("user", text))
            elif isinstance(blocks, str):
                steps.append(_step("user", blocks))
        elif kind == "result":
            result = event
    tool_calls = len(tool_ids) + anonymous_calls if stream.events else None
    if result is None:
        stream.problems.append("the stream has no `result` event: the agent did not finish")
        return AgentReport(tool_calls=tool_calls, trajectory=steps, problems=stream.problems)

    text = result.get("result") if isinstance(result.get("result"), str) else None
    final = None
    if result.get("subtype") == "success" and result.get("is_error") is not True:
        final = text
        if text is None:
            stream.problems.append("the `result` event has no `result` text")
    else:
        said = f": {text[:200]}" if text else ""
        stream.problems.append(f"the agent ended with {result.get('subtype')!r}{said}")
    usage = result.get("usage") if isinstance(result.get("usage"), dict) else {}
    fresh = stream.count(usage.get("input_tokens"), "usage.input_tokens")
    written = stream.count(usage.get("cache_creation_input_tokens"), "usage.cache_creation_input_tokens")
    cached = stream.count(usage.get("cache_read_input_tokens"), "usage.cache_read_input_tokens")
    # Anthropic counts cache reads and writes apart from `input_tokens`; Assay's input is all of it.
    total_input = None if fresh is None else fresh + (written or 0) + (cached or 0)
    # `cost_usd` is what Claude Code versions before `total_cost_usd` wrote.
    cost = result.get("total_cost_usd", result.get("cost_usd"))
    return AgentReport(
        final_report=final,
        input_tokens=total_input,
        output_tokens=stream.count(usage.get("output_tokens"), "usage.output_tokens"),
        cached_tokens=cached,
        cost_usd=stream.amount(cost, "total_cost_usd"),
        turns=stream.count(result.get("num_turns"), "num_turns"),
        tool_calls=tool_calls,
        trajectory=steps,
        problems=stream.problems,
    )


_CODEX_TOOLS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})


def _codex_item(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The trajectory steps of one completed Codex item: a tool item is a call and its result."""
    kind, item_id = item.get("type"), item.get("id")
    if kind == "agent_message":
        return [_step("assistant", item.get("text"))]
    if kind == "reasoning":
        return [_step("reasoning", item.get("text"))]
    failed = item.get("status") == "failed"
    if kind == "command_execution":
        exit_code = item.get("exit_code")
        call = {"id": item_id, "name": "command_execution", "arguments": {"command": item.get("command")}}
        result = _step(
            "tool",
            item.get("aggregated_output"),
            tool_call_id=item_id,
            is_error=failed or (isinstance(exit_code, int) and exit_code != 0),
        )
        return [_step("assistant", None, [call]), result]
    if kind == "file_change":
        call = {"id": item_id, "name": "file_change", "arguments": {"changes": item.get("changes")}}
        return [
            _step("assistant", None, [call]),
            _step("tool", item.get("status"), tool_call_id=item_id, is_error=failed),
        ]
    if kind == "mcp_tool_call":
        name = f"{item.get('server')}.{item.get('tool')}"
        call = {"id": item_id, "name": name, "arguments": item.get("arguments", {})}
        outcome = item.get("error") if failed else item.get("result")
        return [
            _step("assistant", None, [call]),
            _step("tool", outcome, tool_call_id=item_id, is_error=failed),
        ]
    if kind == "web_search":
        call = {"id": item_id, "name": "web_search", "arguments": {"query": item.get("query")}}
        return [_step("assistant", None, [call])]
    return []


def _parse_codex(stdout: str) -> AgentReport:
    """Codex's `exec --json`: `thread.started`, then per turn `turn.started`, `item.*` events and
    `turn.completed` (with the turn's usage) or `turn.failed`; `error` events on the way."""
    stream = _Stream(stdout)
    steps: list[dict[str, Any]] = []
    started: set[Any] = set()
    completed: set[Any] = set()
    tool_calls = 0
    last_message: str | None = None
    final: str | None = None
    ended = False
    totals: dict[str, int] | None = None
    legacy = 0
    for event in stream.events:
        kind = event.get("type")
        item = event.get("item") if isinstance(event.get("item"), dict) else None
        if kind == "turn.started":
            last_message = None
        elif kind == "item.started" and item is not None:
            started.add(item.get("id"))
        elif kind == "item.completed" and item is not None:
            completed.add(item.get("id"))
            steps.extend(_codex_item(item))
            if item.get("type") in _CODEX_TOOLS:
                tool_calls += 1
            elif item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                last_message = item["text"]
            elif item.get("type") == "error":
                stream.problems.append(f"the agent reported an error: {str(item.get('message'))[:200]}")
        elif kind == "turn.completed":
            ended, final = True, last_message
            if last_message is None:
                stream.problems.append("a turn completed without an agent message: no final report")
            usage = event.get("usage") if isinstance(event.get("usage"), dict) else {}
            counts = {
                "input": stream.count(usage.get("input_tokens"), "usage.input_tokens"),
                "cached": stream.count(usage.get("cached_input_tokens"), "usage.cached_input_tokens"),
                "output": stream.count(usage.get("output_tokens"), "usage.output_tokens"),
            }
            # Each turn reports its own usage; a run's is their sum (counts a turn left out stay unknown).
            if all(v is not None for v in counts.values()):
                totals = {k: (totals or {}).get(k, 0) + v for k, v in counts.items()}  # type: ignore[operator]
        elif kind == "turn.failed":
            ended, final = True, None
            error = event.get("error")
            message = error.get("message") if isinstance(error, dict) else error
            stream.problems.append(f"the turn failed: {str(message)[:200]}")
        elif kind == "error":
            stream.problems.append(f"the agent reported an error: {str(event.get('message'))[:200]}")
        elif kind is None and "msg" in event:
            legacy += 1
    if legacy:
        stream.problems.append(
            f"{legacy} events are in Codex's old {{id, msg}} format, which this parser does not read; "
            "use a Codex CLI whose `exec --json` writes thread/turn/item events"
        )
    unfinished = started - completed
    if unfinished:
        items = "1 item" if len(unfinished) == 1 else f"{len(unfinished)} items"
        stream.problems.append(f"{items} started but never completed")
    if not ended:
        stream.problems.append("the stream has no `turn.completed` event: the agent did not finish")
    return AgentReport(
        final_report=final,
        input_tokens=totals["input"] if totals else None,
        output_tokens=totals["output"] if totals else None,
        cached_tokens=totals["cached"] if totals else None,
        tool_calls=tool_calls if stream.events else None,
        trajectory=steps,
        problems=stream.problems,
    )


_PARSERS: dict[str, Callable[[str], AgentReport]] = {
    "claude-code": _parse_claude_code,
    "codex": _parse_codex,
    "jsonl": _parse_jsonl,
    "text": _parse_text,
}
