"""The eval spec: the YAML a user writes, validated by pydantic.

`load_spec(path)` is the only way in. Every problem is reported at once, each naming the field
and the bad value, as a `SpecError` (exit status 2); nothing is written before it passes.

    models.py    EvalSpec (the top level) and DatasetSpec
    targets.py   one model per target kind (openai, anthropic, python, http_agent, container +
                 AgentSpec)
    _model_io.py the chat targets' request fields beyond the conversation: tools, response_format,
                 reasoning, params
    dataset.py   the dataset file read into `Item`s
    _hub.py      a Hugging Face dataset's commit and files (huggingface_hub, imported only for it)
    load.py      YAML in, `EvalSpec` out;  _errors.py: every problem in words
    _base.py     `StrictModel`, the base of every spec model: unknown fields refused, values frozen
"""

from assay.spec._errors import describe_errors
from assay.spec.load import load_spec, parse_spec, spec_title
from assay.spec.models import DatasetSpec, EvalSpec
from assay.spec.targets import (
    TARGET_KINDS,
    AgentSpec,
    AnthropicTarget,
    ContainerTarget,
    HttpAgentTarget,
    OpenAITarget,
    PythonTarget,
    SandboxLimits,
    StageDeadlines,
    TargetSpec,
)

__all__ = [
    "TARGET_KINDS",
    "AgentSpec",
    "AnthropicTarget",
    "ContainerTarget",
    "DatasetSpec",
    "EvalSpec",
    "HttpAgentTarget",
    "OpenAITarget",
    "PythonTarget",
    "SandboxLimits",
    "StageDeadlines",
    "TargetSpec",
    "describe_errors",
    "load_spec",
    "parse_spec",
    "spec_title",
]
