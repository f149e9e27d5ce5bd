"""ATIF, the Agent Trajectory Interchange Format (Harbor writes it; evalkit validates it): its wire
models, the contract a document is validated against, and the conversions between ATIF and the
steps Assay's scorers see (the harness protocol's `role` / `content` / `tool_calls` shape).

    Trajectory ── Agent, Step ── ToolCall, Observation ── ObservationResult, Metrics; FinalMetrics
    read_atif(doc)          validate a document -> (Trajectory | None, status, problem)
    atif_steps(trajectory)  ATIF -> Assay's steps (what scorers get as `Sample.trajectory`)
    to_atif(steps, ...)     Assay's steps -> an ATIF trajectory (`assay trajectories export`)

The contract, as Harbor's models and evalkit's `validate_trajectory` hold it (docs/trajectories.md):
every object is closed (an unknown field is refused), `schema_version` is `ATIF-v1.<n>`,
`step_id`s run 1, 2, 3… in order, `source` is `system`, `user` or `agent`, the agent-only fields
(`model_name`, `reasoning_effort`, `reasoning_content`, `tool_calls`, `metrics`) appear only on
agent steps, and every observation result's `source_call_id` names a tool call of its own step.
Statuses are evalkit's: `valid`, `partial` (a valid document marked `extra.trajectory_status:
"partial"` — the agent's trace was not complete when it was read), `invalid`, `unavailable`.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from assay.outcomes import TrajectoryStatus

SCHEMA_VERSION = "ATIF-v1.6"
_AGENT_ONLY = ("model_name", "reasoning_effort", "reasoning_content", "tool_calls", "metrics")


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Agent(_Closed):
    name: str
    version: str
    model_name: str | None = None
    extra: dict[str, Any] | None = None


class ToolCall(_Closed):
    tool_call_id: str
    function_name: str
    arguments: dict[str, Any]


class ObservationResult(_Closed):
    source_call_id: str | None = None
    content: str | list[Any] | None = None
    subagent_trajectory_ref: list[dict[str, Any]] | None = None


class Observation(_Closed):
    results: list[ObservationResult]


class Metrics(_Closed):
    prompt_tokens: int | None = Field(default=None, ge=0)
    completion_tokens: int | None = Field(default=None, ge=0)
    cached_tokens: int | None = Field(default=None, ge=0)
    cost_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    prompt_token_ids: list[int] | None = None
    completion_token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    extra: dict[str, Any] | None = None


class Step(_Closed):
    step_id: int = Field(ge=1)
    timestamp: str | None = None
    source: Literal["system", "user", "agent"]
    model_name: str | None = None
    reasoning_effort: str | float | None = None
    message: str | list[Any]
    reasoning_content: str | None = None
    tool_calls: list[ToolCall] | None = None
    observation: Observation | None = None
    metrics: Metrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _agent_fields_on_agent_steps(self) -> Step:
        if self.source != "agent":
            present = [name for name in _AGENT_ONLY if getattr(self, name) is not None]
            if present:
                raise ValueError(
                    f"{', '.join(present)}: only an agent step has these, not a {self.source} step"
                )
        calls = {call.tool_call_id for call in self.tool_calls or []}
        for result in self.observation.results if self.observation else []:
            if result.source_call_id is not None and result.source_call_id not in calls:
                raise ValueError(
                    f"observation: source_call_id {result.source_call_id!r} names no tool call of this step"
                )
        return self


class FinalMetrics(_Closed):
    total_prompt_tokens: int | None = Field(default=None, ge=0)
    total_completion_tokens: int | None = Field(default=None, ge=0)
    total_cached_tokens: int | None = Field(default=None, ge=0)
    total_cost_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    total_steps: int | None = Field(default=None, ge=0)
    extra: dict[str, Any] | None = None


class Trajectory(_Closed):
    schema_version: str = Field(pattern=r"^ATIF-v1\.\d+$")
    session_id: str
    agent: Agent
    steps: list[Step]
    notes: str | None = None
    final_metrics: FinalMetrics | None = None
    extra: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _steps_in_order(self) -> Trajectory:
        for position, step in enumerate(self.steps, start=1):
            if step.step_id != position:
                raise ValueError(
                    f"steps.{position - 1}.step_id is {step.step_id}: step ids run 1, 2, 3… in order"
                )
        return self

    def document(self) -> dict[str, Any]:
        """The trajectory as JSON (fields it does not have left out)."""
        return self.model_dump(mode="json", exclude_none=True)


def is_atif(doc: Any) -> bool:
    """Whether a document says it is ATIF (its `schema_version` starts `ATIF-`)."""
    return isinstance(doc, dict) and str(doc.get("schema_version", "")).startswith("ATIF-")


def read_atif(doc: Any) -> tuple[Trajectory | None, TrajectoryStatus, str | None]:
    """Validate an ATIF document against the contract.

    Returns:
        The trajectory (None when invalid), its status (`valid`, `partial` when it is marked so
        in `extra.trajectory_status`, else `invalid`) and the first problem (`where: what`).
    """
    try:
        trajectory = Trajectory.model_validate(doc)
    except ValidationError as exc:
        error = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in error["loc"])
        return None, TrajectoryStatus.INVALID, f"not ATIF: {where + ': ' if where else ''}{error['msg']}"
    marked = (trajectory.extra or {}).get("trajectory_status")
    if marked == TrajectoryStatus.PARTIAL.value:
        return trajectory, TrajectoryStatus.PARTIAL, "the agent's trajectory was incomplete when it was read"
    return trajectory, TrajectoryStatus.VALID, None


def atif_steps(trajectory: Trajectory) -> list[dict[str, Any]]:
    """ATIF steps as the steps Assay's scorers see: a message (`user`, `system`, `assistant`),
    an agent's reasoning as a `reasoning` step, and each observation result as a `tool` step."""
    steps: list[dict[str, Any]] = []
    for step in trajectory.steps:
        if step.source != "agent":
            steps.append({"role": step.source, "content": step.message, "tool_calls": []})
            continue
        if step.reasoning_content:
            steps.append({"role": "reasoning", "content": step.reasoning_content, "tool_calls": []})
        calls = [
            {"id": c.tool_call_id, "name": c.function_name, "arguments": c.arguments}
            for c in step.tool_calls or []
        ]
        agent: dict[str, Any] = {"role": "assistant", "content": step.message, "tool_calls": calls}
        metrics = step.metrics
        if metrics is not None:
            if metrics.prompt_tokens is not None or metrics.completion_tokens is not None:
                agent["tokens"] = {"input": metrics.prompt_tokens, "output": metrics.completion_tokens}
            if metrics.cost_usd is not None:
                agent["cost_usd"] = metrics.cost_usd
        steps.append(agent)
        for result in step.observation.results if step.observation else []:
            steps.append(
                {
                    "role": "tool",
                    "content": result.content,
                    "tool_calls": [],
                    "tool_call_id": result.source_call_id,
                }
            )
    return steps


def to_atif(
    steps: list[dict[str, Any]],
    *,
    session_id: str,
    agent: Agent,
    extra: dict[str, Any] | None = None,
) -> Trajectory:
    """Assay's steps (the harness protocol's shape, or an agent adapter's) as an ATIF trajectory.

    `user` and `system` steps stay what they are; `assistant` is an agent step (its tool calls
    with ids, `call_<n>` where a step gave none); `reasoning` becomes the next agent step's
    `reasoning_content`; a `tool` result joins the observation of the agent step that made its
    call (else of the latest agent step, without a `source_call_id`); any other role is an agent
    step whose `extra.role` keeps it.

    Args:
        steps: the steps, oldest first.
        session_id: the trajectory's id.
        agent: who produced it.
        extra: root-level metadata (where it came from).
    """
    out: list[dict[str, Any]] = []
    owner: dict[str, dict[str, Any]] = {}  # tool call id -> the agent step that made it
    reasoning: list[str] = []
    for step in steps:
        role, content = step.get("role"), step.get("content")
        if role in ("user", "system"):
            out.append({"source": role, "message": _text(content)})
        elif role == "reasoning":
            reasoning.append(_text(content))
        elif role == "tool":
            call_id = step.get("tool_call_id")
            made = owner.get(call_id) if isinstance(call_id, str) else None
            target = made or next((s for s in reversed(out) if s["source"] == "agent"), None)
            if target is None:
                target = {"source": "agent", "message": ""}
                out.append(target)
            result = {"source_call_id": call_id if made is not None else None, "content": _text(content)}
            target.setdefault("observation", {"results": []})["results"].append(result)
        else:
            agent_step: dict[str, Any] = {"source": "agent", "message": _text(content)}
            if role != "assistant":
                agent_step["extra"] = {"role": role}
            if reasoning:
                agent_step["reasoning_content"], reasoning = "\n".join(reasoning), []
            calls = []
            for call in step.get("tool_calls") or []:
                call_id = (
                    call.get("id")
                    if isinstance(call.get("id"), str)
                    else f"call_{len(owner) + len(calls) + 1}"
                )
                arguments = call.get("arguments")
                calls.append(
                    {
                        "tool_call_id": call_id,
                        "function_name": str(call.get("name") or "unknown"),
                        "arguments": arguments if isinstance(arguments, dict) else {"value": arguments},
                    }
                )
            if calls:
                agent_step["tool_calls"] = calls
                for call in calls:
                    owner[call["tool_call_id"]] = agent_step
            metrics = _metrics(step)
            if metrics:
                agent_step["metrics"] = metrics
            out.append(agent_step)
    if reasoning:  # reasoning at the very end: a step of its own
        out.append({"source": "agent", "message": "", "reasoning_content": "\n".join(reasoning)})
    for number, step in enumerate(out, start=1):
        step["step_id"] = number
    return Trajectory.model_validate(
        {
            "schema_version": SCHEMA_VERSION,
            "session_id": session_id,
            "agent": agent,
            "steps": out,
            "extra": extra,
        }
    )


def _metrics(step: dict[str, Any]) -> dict[str, Any]:
    tokens = step.get("tokens") if isinstance(step.get("tokens"), dict) else {}
    metrics = {
        "prompt_tokens": tokens.get("input"),
        "completion_tokens": tokens.get("output"),
        "cost_usd": step.get("cost_usd"),
    }
    return {k: v for k, v in metrics.items() if v is not None}


def _text(content: Any) -> str:
    """A step's content as an ATIF message: text as it is, anything else as JSON."""
    if content is None:
        return ""
    return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
