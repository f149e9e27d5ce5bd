"""`adapter: claude-code`: Claude Code run headless (`claude -p`), its stream read from
`--output-format stream-json --verbose`; needs `ANTHROPIC_API_KEY` and a pinned `agent.model`.

What Claude Code 2.1 does, and what follows here (docs/agent-adapters.md):
- without `CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1` it also calls api.anthropic.com (whatever
  `ANTHROPIC_BASE_URL` says): always set. The spec's `base_url` is its `ANTHROPIC_BASE_URL`.
- after `--continue`, the `result` event's `total_cost_usd` is the conversation's total.
- a refused key is retried ten times over ~3 minutes (`system`/`api_retry` events with
  `error_status: 401`), then it ends `subtype: success, is_error: true`: the first such retry
  stops the run.
"""

from __future__ import annotations

from typing import Any

from assay.spec.targets import AgentSpec
from assay.targets.container.agents._base import (
    Adapter,
    AgentReport,
    AgentSettings,
    KeyProbe,
    Parser,
    Stop,
    Stream,
    message_text,
    step,
)

KEY = "ANTHROPIC_API_KEY"
_REFUSED = frozenset({401, 403})


def settings(spec: AgentSpec) -> AgentSettings:
    """Its environment: no calls beyond the model's, and the endpoint when the spec names one."""
    env = {"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    if spec.base_url is not None:
        env["ANTHROPIC_BASE_URL"] = spec.base_url
    return AgentSettings(env=env)


def stop_event(event: dict[str, Any]) -> Stop | None:
    """A refused key, at its first retry."""
    status = event.get("error_status")
    if event.get("type") == "system" and event.get("subtype") == "api_retry" and status in _REFUSED:
        return Stop(f"the provider refused the key (HTTP {status}): {KEY} is wrong or revoked", status)
    return None


# The container is the sandbox, so the CLIs' own permission prompts and sandboxes are switched off:
# headless, a prompt would just deny every tool call.
_HEADLESS = (
    "claude",
    "-p",
    "--output-format",
    "stream-json",
    "--verbose",
    "--model",
    "{model}",
    "--dangerously-skip-permissions",
)

ADAPTER = Adapter(
    name="claude-code",
    command=(*_HEADLESS, "--", "{prompt}"),
    parser="claude-code",
    provider_keys=(KEY,),
    needs_model=True,
    version_command=("claude", "--version"),
    egress_hosts=("api.anthropic.com",),
    key_probe=KeyProbe(
        key=KEY,
        base_url_env="ANTHROPIC_BASE_URL",
        base_url="https://api.anthropic.com",
        path="/v1/models",
        header="x-api-key",
        headers=(("anthropic-version", "2023-06-01"),),
    ),
    # `--continue`: the most recent conversation in this folder — the attempt's container is
    # fresh, so that is this session's.
    resume_command=(*_HEADLESS, "--continue", "--", "{prompt}"),
    resume_totals=frozenset({"cost_usd"}),
    settings=settings,
    stop_event=stop_event,
)


def parse(stdout: str) -> AgentReport:
    """Claude Code's `--output-format stream-json --verbose`: `system` (init), `assistant` and
    `user` messages, and one `result` event at the end carrying the run's totals."""
    stream = Stream(stdout)
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
                    steps.append(step("reasoning", block["thinking"]))
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
            text = message_text([b for b in blocks if b.get("type") == "text"])
            if text is not None or calls:
                steps.append(step("assistant", text, calls))
        elif kind == "user":
            if isinstance(blocks, list):
                for block in blocks:
                    if isinstance(block, dict) and block.get("type") == "tool_result":
                        steps.append(
                            step(
                                "tool",
                                message_text(block.get("content")),
                                tool_call_id=block.get("tool_use_id"),
                                is_error=block.get("is_error") is True,
                            )
                        )
                text = message_text([b for b in blocks if isinstance(b, dict) and b.get("type") == "text"])
                if text is not None:
                    steps.append(step("user", text))
            elif isinstance(blocks, str):
                steps.append(step("user", blocks))
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
        cache_write_tokens=written,
        cost_usd=stream.amount(cost, "total_cost_usd"),
        turns=stream.count(result.get("num_turns"), "num_turns"),
        tool_calls=tool_calls,
        trajectory=steps,
        problems=stream.problems,
    )


PARSERS: dict[str, Parser] = {"claude-code": parse}
