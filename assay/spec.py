"""The eval spec: the YAML a user writes, validated by pydantic.

`load_spec(path)` is the only way in. Every problem is reported at once, each naming the field
and the bad value, as a `SpecError` (exit status 2); nothing is written before it passes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from assay.errors import SpecError
from evaluators import ScorerSpec


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DatasetSpec(_Strict):
    """Where the items come from and which fields mean what.

    Args:
        path: a JSONL, CSV or Parquet file, relative to the spec's folder.
        id: the field holding a stable item id; without it the id is a hash of the row.
        input: the field holding the item's input.
        expected: the field holding the expected answer, if any.
        annotations: fields kept as the item's annotations; default: every field not mapped above.
        limit: use only the first N rows (handy while writing an eval).
    """

    path: str
    id: str | None = None
    input: str = "input"
    expected: str | None = "expected"
    annotations: list[str] | None = None
    limit: int | None = Field(default=None, ge=1)

    @field_validator("annotations", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


class OpenAITarget(_Strict):
    """Any OpenAI-compatible chat-completions endpoint.

    Args:
        base_url: e.g. `http://127.0.0.1:8000/v1`; `/chat/completions` is appended.
        model: the exact model version (a moving alias makes runs unrepeatable).
        api_key_env: the environment variable holding the API key; the key itself is never stored.
        prompt: a template formatted with the item's fields, e.g. `"{question}"`.
        system: an optional system prompt (also a template).
        temperature, max_tokens: passed through when set.
        timeout: seconds for one HTTP attempt.
        max_retries: retries after the first attempt on 429 / 5xx / timeouts / connection errors.
    """

    kind: Literal["openai"]
    base_url: str = Field(pattern=r"^https?://")
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    prompt: str = "{input}"
    system: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2)
    max_tokens: int | None = Field(default=None, ge=1)
    timeout: float = Field(default=60.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)

    @field_validator("prompt", "system")
    @classmethod
    def _template_parses(cls, value: str | None) -> str | None:
        if value is not None:
            import string

            try:
                list(string.Formatter().parse(value))
            except ValueError as exc:
                raise ValueError(f"bad template {value!r}: {exc}") from None
        return value


class PythonTarget(_Strict):
    """A Python function `module:function`, sync or async, called with the item's input.

    Args:
        function: `module:function`; the spec's folder is importable.
    """

    kind: Literal["python"]
    function: str = Field(pattern=r"^[\w.]+:[\w.]+$")


TargetSpec = Annotated[OpenAITarget | PythonTarget, Field(discriminator="kind")]


class EvalSpec(_Strict):
    """One eval: a dataset, a target, scorers and how to run them.

    Args:
        name: the eval's name (runs are listed under it).
        dataset: see `DatasetSpec`.
        target: `openai` or `python`.
        scorers: one or more scorers; names must be unique.
        concurrency: how many target calls the whole run has in flight at most.
        scorer_concurrency: how many scorers run at once on one item.
        trials: how many times each item is run.
        seed: recorded in the run's identity; passed to targets that take one.
        item_timeout: seconds one item (target call with its retries) may take; past it: `failed`.
        fail_on_item_error_rate: the run fails its gate when failed / attempted exceeds this (1 disables).
        tags: free labels, stored on the run.
    """

    name: str = Field(min_length=1, pattern=r"^[\w.\-]+$")
    description: str | None = None
    dataset: DatasetSpec
    target: TargetSpec
    scorers: list[ScorerSpec] = Field(min_length=1)
    concurrency: int = Field(default=5, ge=1, le=10_000)
    scorer_concurrency: int = Field(default=5, ge=1, le=1_000)
    trials: int = Field(default=1, ge=1, le=1_000)
    seed: int = 0
    item_timeout: float | None = Field(default=None, gt=0)
    fail_on_item_error_rate: float = Field(default=0.05, ge=0, le=1)
    tags: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _unique_scorer_names(self) -> EvalSpec:
        names = [s.name for s in self.scorers]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"scorer names must be unique; repeated: {', '.join(dupes)}")
        return self


def _describe(error: dict[str, Any]) -> str:
    where = ".".join(str(p) for p in error["loc"]) or "(top level)"
    message = error["msg"]
    if error["type"] in ("missing",):
        return f"{where}: field required"
    if error["type"] == "extra_forbidden":
        return f"{where}: unknown field"
    if error["type"] == "union_tag_invalid" or error["type"] == "union_tag_not_found":
        return f"{where}: {message}"
    return f"{where}: {message} (got {error.get('input')!r})"


def parse_spec(data: Any, *, source: str = "spec") -> EvalSpec:
    """Validate an already-parsed spec document; raises `SpecError` listing every problem."""
    if not isinstance(data, dict):
        raise SpecError(f"expected a mapping at the top level, got {type(data).__name__}", source=source)
    try:
        return EvalSpec.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(e) for e in exc.errors(include_url=False)]
        raise SpecError(problems, source=source) from None


def load_spec(path: str | Path) -> EvalSpec:
    """Read and validate a YAML (or JSON) spec file.

    Args:
        path: the spec file; relative paths inside it are relative to its folder.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"cannot read spec: {exc.strerror}", source=str(path)) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise SpecError(f"{where}not valid YAML: {getattr(exc, 'problem', exc)}", source=str(path)) from None
    return parse_spec(data, source=str(path))
