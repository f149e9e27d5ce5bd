"""Targets: what an eval runs over its dataset.

One module (or package) per kind, each behind one registered interface (`TargetKind`, in
`_kind`): `kind_of(spec.target)` answers everything a run needs to know about its target — its
checks, preflight snapshot, fixture files, identity, whether it makes containers — and
`open_target(spec, ...)` builds it. Every target is an async callable
`target(item, trial) -> TargetResult` that raises `TargetFailure` when the call failed for good.

    openai            OpenAIKind, OpenAIChatTarget: a chat-completions endpoint
    anthropic         AnthropicKind, AnthropicMessagesTarget: Anthropic's Messages API
    python            PythonKind, PythonFunctionTarget: a user's function
    http_agent/       HttpAgentKind, HttpAgent: an agent behind an HTTP harness
    container/        ContainerKind, and ContainerAgent with its agent adapters (Docker)
    _kind             TargetKind, TargetContext, Metered       _registry   KINDS, kind_of
    _chat             ChatTarget: what the two chat targets share (calls, sessions, batch mode)
    _chat_kind        ChatKind: the two chat kinds' checks, identity and metering
    _model_io         the request fields on the wire (tools, response_format, reasoning, params)
                      and a reply of tool calls as the item's answer
    _tool_loop        `tool_loop: true`: the model's calls of the Python tools run, their results
                      sent back, until it answers in words; the exchange as the trajectory
    _conversation     an item's conversation (`messages:`): spec turns and a field's, checked per row
    _base             TargetResult, the Target protocols, render
    atif              ATIF trajectories: wire models, validation, conversion to and from steps

A new kind: its spec model in `assay/spec/targets.py` (and in `TargetSpec`), a module or package
here with its `TargetKind` subclass and its target, and one entry in `_registry._WHERE`.
"""

from __future__ import annotations

from assay._lazy import lazy_exports
from assay.calls.accounting import Usage
from assay.targets._base import SandboxedTarget, SessionState, SessionTarget, Target, TargetResult, render
from assay.targets._kind import Metered, TargetContext, TargetKind
from assay.targets._registry import KINDS, kind_of, makes_containers, open_target

# Each kind's own module is loaded when first used (`_registry`): an `openai` run never imports
# the HTTP agent's protocol models.
_lazy, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "anthropic": ("AnthropicMessagesTarget",),
        "http_agent": ("HttpAgent", "prepare_http_agent"),
        "openai": ("OpenAIChatTarget",),
        "python": ("PythonFunctionTarget",),
    },
)

__all__ = [
    "KINDS",
    "AnthropicMessagesTarget",
    "HttpAgent",
    "Metered",
    "OpenAIChatTarget",
    "PythonFunctionTarget",
    "SandboxedTarget",
    "SessionState",
    "SessionTarget",
    "Target",
    "TargetContext",
    "TargetKind",
    "TargetResult",
    "Usage",
    "kind_of",
    "makes_containers",
    "open_target",
    "prepare_http_agent",
    "render",
]
