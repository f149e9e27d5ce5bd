"""`adapter: codex`: the Codex CLI run headless (`codex exec`), its stream read from `--json`
(thread, turn and item events); needs `OPENAI_API_KEY` and an `agent.model` of its catalog.

What Codex 0.171 does, and what follows here (docs/agent-adapters.md):
- `codex exec` reads its key from `CODEX_API_KEY`, never `OPENAI_API_KEY` (a request would go
  out without Authorization): the host's `OPENAI_API_KEY` reaches the container under that name,
  through the env file.
- it ignores `OPENAI_BASE_URL`: the endpoint is a `model_provider` of its `config.toml`, which
  Assay writes (`$HOME/.codex/config.toml`) with the spec's `base_url` (else OpenAI's), the key's
  variable, `wire_api = "responses"` and `supports_websockets = false` — else it first tries a
  WebSocket and falls back after ~6 s with five `error` events.
- its model catalog knows undated names only: a dated name runs on fallback metadata and another
  tool set. The pin is the undated name with the CLI's version (recorded as `agent_version`).
- after `exec resume --last`, `turn.completed.usage` is the thread's total, not the turn's.
- a refused key is retried five times (`error` events "Reconnecting… (unexpected status 401…)"):
  the first one stops the run.
"""

from __future__ import annotations

import json
import re
from typing import Any

from assay.calls.pinning import has_date_stamp, moving_alias
from assay.spec.targets import AgentSpec
from assay.targets.container.agents._base import (
    Adapter,
    AgentReport,
    AgentSettings,
    KeyProbe,
    Parser,
    Stop,
    Stream,
    step,
)

KEY = "OPENAI_API_KEY"
# What `codex exec` reads its key from (and the provider's `env_key` names).
CODEX_KEY = "CODEX_API_KEY"
OPENAI_ENDPOINT = "https://api.openai.com/v1"
_PROVIDER = "assay"
_REFUSED = re.compile(r"unexpected status (401|403)\b")

# The container is the sandbox, so the CLIs' own permission prompts and sandboxes are switched off:
# headless, a prompt would just deny every tool call, and Codex's Landlock sandbox does not work
# inside most containers.
_OPTIONS = (
    "--json",
    "--model",
    "{model}",
    "--skip-git-repo-check",
    "--dangerously-bypass-approvals-and-sandbox",
)


def settings(spec: AgentSpec) -> AgentSettings:
    """Codex's `config.toml`: the endpoint as a model provider of its own (Codex takes no
    endpoint from the environment), over HTTP streaming only, its key read from `CODEX_API_KEY`;
    no update check (it would call GitHub)."""
    lines = [
        f"model_provider = {json.dumps(_PROVIDER)}",
        "check_for_update_on_startup = false",
        "",
        f"[model_providers.{_PROVIDER}]",
        f"name = {json.dumps(_PROVIDER)}",
        f"base_url = {json.dumps(spec.base_url or OPENAI_ENDPOINT)}",
        f"env_key = {json.dumps(CODEX_KEY)}",
        'wire_api = "responses"',
        "supports_websockets = false",
        "",
    ]
    return AgentSettings(home_files={".codex/config.toml": "\n".join(lines)})


def model_problem(model: str) -> str | None:
    """Codex's catalog holds undated names (`gpt-5.5`): one is a pin together with the CLI's
    version; a dated name is refused, since Codex would run it on fallback metadata."""
    if not model.strip():
        return "is blank"
    if moving_alias(model):
        return f"{model!r} is a moving alias ('latest'); name a model of Codex's catalog, e.g. gpt-5.5"
    if has_date_stamp(model):
        return (
            f"{model!r} is dated, and Codex's model catalog knows undated names only: it would run "
            "on fallback metadata with another tool set. Name the undated model (e.g. gpt-5.5): "
            "with the Codex version the run records (agent_version) that is the pin"
        )
    return None


def stop_event(event: dict[str, Any]) -> Stop | None:
    """A refused key, at its first retry."""
    if event.get("type") != "error":
        return None
    found = _REFUSED.search(str(event.get("message")))
    if found is None:
        return None
    status = int(found.group(1))
    return Stop(
        f"the provider refused the key (HTTP {status}): {KEY} (passed to Codex as {CODEX_KEY}) "
        "is wrong or revoked",
        status,
    )


ADAPTER = Adapter(
    name="codex",
    command=("codex", "exec", *_OPTIONS, "--", "{prompt}"),
    parser="codex",
    provider_keys=(KEY,),
    needs_model=True,
    version_command=("codex", "--version"),
    egress_hosts=("api.openai.com",),
    key_probe=KeyProbe(key=KEY, base_url_env="OPENAI_BASE_URL", base_url=OPENAI_ENDPOINT, path="/models"),
    # `exec resume --last`: the most recent session — the attempt's container is fresh, so this one's.
    resume_command=("codex", "exec", "resume", "--last", *_OPTIONS, "--", "{prompt}"),
    resume_totals=frozenset(
        {"input_tokens", "output_tokens", "cached_tokens", "cache_write_tokens", "reasoning_tokens"}
    ),
    key_names=((KEY, CODEX_KEY),),
    settings=settings,
    model_problem=model_problem,
    stop_event=stop_event,
)

# `turn.completed.usage`'s fields by Assay's token kind (cached, cache writes and reasoning are
# parts of input and output, as OpenAI counts them).
_USAGE = {
    "input": "input_tokens",
    "cached": "cached_input_tokens",
    "cache_write": "cache_write_input_tokens",
    "output": "output_tokens",
    "reasoning": "reasoning_output_tokens",
}
_TOOL_ITEMS = frozenset({"command_execution", "file_change", "mcp_tool_call", "web_search"})


def _item_steps(item: dict[str, Any]) -> list[dict[str, Any]]:
    """The trajectory steps of one completed Codex item: a tool item is a call and its result."""
    kind, item_id = item.get("type"), item.get("id")
    if kind == "agent_message":
        return [step("assistant", item.get("text"))]
    if kind == "reasoning":
        return [step("reasoning", item.get("text"))]
    failed = item.get("status") == "failed"
    if kind == "command_execution":
        exit_code = item.get("exit_code")
        call = {"id": item_id, "name": "command_execution", "arguments": {"command": item.get("command")}}
        result = step(
            "tool",
            item.get("aggregated_output"),
            tool_call_id=item_id,
            is_error=failed or (isinstance(exit_code, int) and exit_code != 0),
        )
        return [step("assistant", None, [call]), result]
    if kind == "file_change":
        call = {"id": item_id, "name": "file_change", "arguments": {"changes": item.get("changes")}}
        return [
            step("assistant", None, [call]),
            step("tool", item.get("status"), tool_call_id=item_id, is_error=failed),
        ]
    if kind == "mcp_tool_call":
        name = f"{item.get('server')}.{item.get('tool')}"
        call = {"id": item_id, "name": name, "arguments": item.get("arguments", {})}
        outcome = item.get("error") if failed else item.get("result")
        return [
            step("assistant", None, [call]),
            step("tool", outcome, tool_call_id=item_id, is_error=failed),
        ]
    if kind == "web_search":
        call = {"id": item_id, "name": "web_search", "arguments": {"query": item.get("query")}}
        return [step("assistant", None, [call])]
    return []


def parse(stdout: str) -> AgentReport:
    """Codex's `exec --json`: `thread.started`, then per turn `turn.started`, `item.*` events and
    `turn.completed` (with the turn's usage) or `turn.failed`; `error` events on the way."""
    stream = Stream(stdout)
    steps: list[dict[str, Any]] = []
    started: set[Any] = set()
    completed: set[Any] = set()
    tool_calls = 0
    last_message: str | None = None
    final: str | None = None
    ended = False
    totals: dict[str, int | None] = {}
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
            steps.extend(_item_steps(item))
            if item.get("type") in _TOOL_ITEMS:
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
            # One `exec` is one turn; its usage is the thread's so far (after a resume, earlier
            # runs' too: `Adapter.resume_totals`). The last turn's is the run's.
            totals = {k: stream.count(usage.get(name), f"usage.{name}") for k, name in _USAGE.items()}
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
        input_tokens=totals.get("input"),
        output_tokens=totals.get("output"),
        cached_tokens=totals.get("cached"),
        cache_write_tokens=totals.get("cache_write"),
        reasoning_tokens=totals.get("reasoning"),
        tool_calls=tool_calls if stream.events else None,
        trajectory=steps,
        problems=stream.problems,
    )


PARSERS: dict[str, Parser] = {"codex": parse}
