"""The harness protocol's documents (docs/harness-protocol.md), as Assay reads them.

`GET /capabilities` (`Capabilities`), `GET /runs/{id}` (`RunState`, its `artifacts` entries as
`Artifact`) and the steps of `GET /runs/{id}/trajectory` (`Step`). Every model is lenient —
a harness may send more than the protocol names — and strict about the types of what it does
name. Also here: the capabilities' `input_schema` as a validator, and the checks on the values a
harness hands back (run ids, error texts).

jsonschema is imported where a schema is used: every run imports the targets registry, and only
an http_agent run needs it.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

PROTOCOL = "assay-harness/1"
TERMINAL = frozenset({"completed", "failed", "timeout", "cancelled"})
STATUSES = TERMINAL | {"queued", "running"}
MAX_RUN_ID = 256


class _Lenient(BaseModel):
    """Harness documents may carry more than the protocol names; the rest is ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)


class Accepts(_Lenient):
    file_input: StrictBool = False
    file_urls: StrictBool = False
    model_override: StrictBool = False
    cancel: StrictBool = False
    sessions: StrictBool = False


class Provides(_Lenient):
    trajectory: StrictBool = False
    workspace: StrictBool = False


class Limits(_Lenient):
    max_concurrent_runs: int | None = Field(default=None, ge=1, strict=True)


class Capabilities(_Lenient):
    """`GET /capabilities`. Every section is optional; what is left out defaults to "no"."""

    accepts: Accepts = Accepts()
    provides: Provides = Provides()
    limits: Limits = Limits()
    input_schema: dict[str, Any] | bool | None = None


class Artifact(_Lenient):
    path: str
    size: int | None = Field(default=None, ge=0, strict=True)


class RunState(_Lenient):
    """`GET /runs/{id}`. `artifacts` is checked entry by entry (a bad entry is skipped, not fatal)."""

    status: str
    answer: str | None = None
    output: Any = None
    error: Any = None
    model: str | None = None
    artifacts: list[Any] | None = None


class StepTokens(_Lenient):
    input: int | None = Field(default=None, ge=0, strict=True)
    output: int | None = Field(default=None, ge=0, strict=True)


class Step(_Lenient):
    """One trajectory step: a message, the tool calls it made, what it consumed."""

    role: str = Field(min_length=1)
    content: Any = None
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    tokens: StepTokens | None = None
    cost_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)


def first_error(exc: ValidationError) -> str:
    """A validation error's first problem, as `where: what`."""
    error = exc.errors(include_url=False)[0]
    where = ".".join(str(p) for p in error["loc"])
    return f"{where}: {error['msg']}" if where else error["msg"]


class CapabilitiesError(ValueError):
    """A capabilities document that is not what the protocol says; the message says why."""


def read_capabilities(doc: Any) -> tuple[Capabilities, Validator | None]:
    """A `GET /capabilities` document, checked, and a validator for its `input_schema` (None
    without one). Raises `CapabilitiesError` naming the first problem."""
    import jsonschema

    try:
        caps = Capabilities.model_validate(doc)
    except ValidationError as exc:
        raise CapabilitiesError(f"not what the protocol says: {first_error(exc)}") from None
    if caps.input_schema is None:
        return caps, None
    cls = jsonschema.validators.validator_for(caps.input_schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(caps.input_schema)
    except jsonschema.exceptions.SchemaError as exc:
        raise CapabilitiesError(f"input_schema is not a valid JSON Schema: {exc.message}") from None
    return caps, cls(caps.input_schema)


def input_problem(validator: Validator | None, value: Any) -> str | None:
    """Why `value` fails the harness's `input_schema` (its best-matching error), if it does."""
    if validator is None:
        return None
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "input" + "".join(f"[{p!r}]" for p in error.absolute_path)
    return f"{where}: {error.message}"


def error_text(value: Any) -> str:
    """A run's `error` as text: its `message` when it is an object that has one, else as given
    (JSON for anything but text)."""
    if value is None:
        return ""
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        return value["message"]
    return value if isinstance(value, str) else json.dumps(value, default=str)


def usable_run_id(value: Any) -> bool:
    """Whether a harness run id can be used in a URL path segment and a folder name."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_RUN_ID
        and value not in (".", "..")
        and not re.search(r"[/\\\x00-\x1f\x7f]", value)
    )
