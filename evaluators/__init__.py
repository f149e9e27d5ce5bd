"""Assay's scorers and the function that runs them.

A spec lists scorers by `kind`; `ScorerSpec` is the union a spec model validates them with
(`scorers: list[ScorerSpec]`), and `evaluate` runs one on one sample.

    exact_match   output equals expected, with optional normalisation     ExactMatch
    includes      output contains expected (or `value`)                   Includes
    regex         a regular expression matches the output                 Regex
    json_valid    output is valid JSON                                    JsonValid
    json_schema   output is JSON valid under a JSON Schema                JsonSchema
    numeric       the number in the output is close to expected           Numeric
    token_f1      SQuAD-style token F1 against expected                   TokenF1
    user_code     a Python function named `module:function`               UserCode
    remote        an HTTP evaluator returning several named scores        Remote
    code_exec     checks run in a sandbox (the attempt's, or a fresh one)  CodeExec
    llm_judge     a model grades the output against a rubric              LlmJudge
    tool_call     the model's tool calls are an expected answer (BFCL's)  ToolCallMatch
    trajectory    the tools called follow an expected sequence            TrajectoryMatch

One concern a module: `deterministic` (the first seven kinds), `user` (user_code), `remote`,
`code_exec`, `tool_call` and `trajectory` (over `_call_matching`: expected calls and the argument
matcher), and `llm_judge` (its spec), with `_judge_clients` (the judge's live clients) and
`_judge_reply` (reading its reply); `_base` (`Scorer`, `Sample`, `Score`: the contract),
`_evaluate` (`evaluate`: one scorer on one sample, whatever happens, as a `ScoreRecord`) and
`_imports` (resolving the `module:function` references a spec names).
"""

from __future__ import annotations

from typing import Annotated, get_args

from pydantic import Field

from assay.evaluators._base import Sample, Score, Scorer
from assay.evaluators._evaluate import ScoreRecord, evaluate
from assay.evaluators.code_exec import CodeExec
from assay.evaluators.deterministic import (
    ExactMatch,
    Includes,
    JsonSchema,
    JsonValid,
    Numeric,
    Regex,
    TokenF1,
)
from assay.evaluators.llm_judge import LlmJudge
from assay.evaluators.remote import Remote
from assay.evaluators.tool_call import ToolCallMatch
from assay.evaluators.trajectory import TrajectoryMatch
from assay.evaluators.user import UserCode

ScorerSpec = Annotated[
    ExactMatch
    | Includes
    | Regex
    | JsonValid
    | JsonSchema
    | Numeric
    | TokenF1
    | UserCode
    | LlmJudge
    | Remote
    | CodeExec
    | ToolCallMatch
    | TrajectoryMatch,
    Field(discriminator="kind"),
]

SCORER_CLASSES: dict[str, type[Scorer]] = {
    get_args(cls.model_fields["kind"].annotation)[0]: cls for cls in get_args(get_args(ScorerSpec)[0])
}
SCORER_KINDS: list[str] = sorted(SCORER_CLASSES)

__all__ = [
    "SCORER_CLASSES",
    "SCORER_KINDS",
    "CodeExec",
    "ExactMatch",
    "Includes",
    "JsonSchema",
    "JsonValid",
    "LlmJudge",
    "Numeric",
    "Regex",
    "Remote",
    "Sample",
    "Score",
    "ScoreRecord",
    "Scorer",
    "ScorerSpec",
    "TokenF1",
    "ToolCallMatch",
    "TrajectoryMatch",
    "UserCode",
    "evaluate",
]
