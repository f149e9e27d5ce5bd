"""`adapter: cli`: a command of your own. `agent.command` is required (the argv template), no
provider key is added, and its stdout is read as plain text (`parser: text`, the default) or as
generic JSON lines (`parser: jsonl`)."""

from __future__ import annotations

from typing import Any

from assay.targets.container.agents._base import Adapter, AgentReport, Parser, Stream, step

ADAPTER = Adapter(name="cli", command=None, parser="text", provider_keys=(), needs_model=False)


def parse_text(stdout: str) -> AgentReport:
    report = stdout.strip()
    if not report:
        return AgentReport(problems=["the agent wrote nothing to stdout"])
    return AgentReport(final_report=report)


def parse_jsonl(stdout: str) -> AgentReport:
    """The generic JSON-lines format. The final report is the last object's `result`, `final` or
    `output` string (first of those it has); `usage` ({input_tokens, output_tokens, cached_tokens})
    and `cost_usd` come from the last object carrying them, as run totals; an object with a string
    `role` is a trajectory step."""
    stream = Stream(stdout)
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
            steps.append(step(event["role"], event.get("content"), calls))
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


PARSERS: dict[str, Parser] = {"text": parse_text, "jsonl": parse_jsonl}
