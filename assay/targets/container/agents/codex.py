"""`adapter: codex`: the Codex CLI run headless (`codex exec`), its stream read from `--json`
(thread, turn and item events); needs `OPENAI_API_KEY` and a pinned `agent.model`."""

from __future__ import annotations

from typing import Any

from assay.targets.container.agents._base import Adapter, AgentReport, KeyProbe, Parser, Stream, step

# The container is the sandbox, so the CLIs' own permission prompts and sandboxes are switched off:
# headless, a prompt would just deny every tool call, and Codex's Landlock sandbox does not work
ADAPTER = Adapter(
    name="codex",
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
    version_command=("codex", "--version"),
    egress_hosts=("api.openai.com",),
    key_probe=KeyProbe(
        key="OPENAI_API_KEY",
        base_url_env="OPENAI_BASE_URL",
        base_url="https://api.openai.com/v1",
        path="/models",
    ),
    # `exec resume --last`: the most recent session — the attempt's container is fresh, so this one's.
    resume_command=(
        "codex",
        "exec",
        "resume",
        "--last",
        "--json",
        "--model",
        "{model}",
        "--skip-git-repo-check",
        "--dangerously-bypass-approvals-and-sandbox",
        "--",
        "{prompt}",
    ),
)

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


PARSERS: dict[str, Parser] = {"codex": parse}
