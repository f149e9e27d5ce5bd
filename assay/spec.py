"""The eval spec: the YAML a user writes, validated by pydantic.

`load_spec(path)` is the only way in. Every problem is reported at once, each naming the field
and the bad value, as a `SpecError` (exit status 2); nothing is written before it passes.
"""

from __future__ import annotations

import difflib
import re
import string
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from assay.accounting import Price, parse_budget
from assay.capture import CaptureSettings
from assay.chat import HttpURL
from assay.errors import SpecError
from assay.outcomes import GAUGE_PREFIX
from assay.response_cache import check_cache
from assay.sandbox.agents import AgentSpec
from evaluators import SCORER_KINDS, ScorerSpec


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
    limit: int | None = Field(default=None, ge=1, strict=True)

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
        cache: `true` answers repeated requests from the store's response cache (needs
            `temperature: 0`); `always` caches whatever the temperature.
    """

    kind: Literal["openai"]
    base_url: HttpURL
    model: str = Field(min_length=1)
    api_key_env: str | None = None
    prompt: str = "{input}"
    system: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2, strict=True)
    max_tokens: int | None = Field(default=None, ge=1, strict=True)
    timeout: float = Field(default=60.0, gt=0, strict=True)
    max_retries: int = Field(default=4, ge=0, le=20, strict=True)
    cache: bool | Literal["always"] = False

    @model_validator(mode="after")
    def _cache_needs_greedy_sampling(self) -> OpenAITarget:
        check_cache(self.cache, self.temperature)
        return self

    @field_validator("prompt", "system")
    @classmethod
    def _template_parses(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                fields = [f for _, f, _, _ in string.Formatter().parse(value) if f is not None]
            except ValueError as exc:
                raise ValueError(f"bad template {value!r}: {exc}") from None
            for name in fields:
                head = re.split(r"[.\[]", name, maxsplit=1)[0]
                if head == "" or head.isdigit():
                    raise ValueError(
                        f"bad template {value!r}: positional field {{{name}}} cannot be filled; "
                        "name a dataset field, e.g. {question}"
                    )
                if "." in name.split("[", 1)[0]:
                    raise ValueError(
                        f"bad template {value!r}: attribute access in {{{name}}} is not supported; "
                        "use {field[key]} for nested values"
                    )
        return value


class PythonTarget(_Strict):
    """A Python function `module:function`, sync or async, called with the item's input.

    Args:
        function: `module:function`; the spec's folder is importable.
    """

    kind: Literal["python"]
    function: str = Field(pattern=r"^[\w.]+:[\w.]+$")


class HttpAgentTarget(_Strict):
    """An agent behind an HTTP harness speaking Assay's harness protocol (docs/harness-protocol.md):
    `POST /runs` per item x trial, then `GET /runs/{id}` until it ends. Its spend is not measured
    by Assay: the cost it reports in its trajectory is kept as caller-reported cost.

    Args:
        base_url: the harness's root, e.g. `http://127.0.0.1:8080`; `/capabilities` and `/runs`
            are appended.
        model: ask the harness to run this model; sent only when its capabilities accept a
            model override (otherwise the run warns and the harness uses its default).
        api_key_env: the environment variable holding the harness's API key, sent as a bearer
            token; the key itself is never stored.
        poll_interval: seconds between two `GET /runs/{id}` of one run.
        timeout: seconds one harness run may take, from `POST /runs` to a final status; past it
            the item fails with `timeout` (and the run is cancelled if the harness accepts that).
        request_timeout: seconds for one HTTP request to the harness.
        max_retries: retries of one request after a 429, a 5xx or (for reads) a connection error.
        max_artifact_bytes: the largest artifact downloaded into the store (bytes); a larger
            one is skipped with a warning. 0 downloads none.
        max_attempt_bytes: the most artifact bytes one attempt downloads, all files together;
            a file that would pass it is skipped with a warning.
    """

    kind: Literal["http_agent"]
    base_url: HttpURL
    model: str | None = Field(default=None, min_length=1)
    api_key_env: str | None = None
    poll_interval: float = Field(default=0.2, gt=0, le=60, strict=True)
    timeout: float = Field(default=600.0, gt=0, strict=True)
    request_timeout: float = Field(default=30.0, gt=0, strict=True)
    max_retries: int = Field(default=4, ge=0, le=20, strict=True)
    max_artifact_bytes: int = Field(default=16 * 2**20, ge=0, strict=True)
    max_attempt_bytes: int = Field(default=64 * 2**20, ge=0, strict=True)


class StageDeadlines(_Strict):
    """Seconds each stage of a container attempt may take; the one that fires is named in the
    item's error.

    Args:
        provision: create and start the container, copy the fixtures in.
        agent: the command or agent run.
        export: read the workspace back.
        scoring: every scorer of the attempt, together.
        cleanup: remove the container (and the egress sidecar and network).
    """

    provision: float = Field(default=120.0, gt=0, strict=True)
    agent: float = Field(default=600.0, gt=0, strict=True)
    export: float = Field(default=120.0, gt=0, strict=True)
    scoring: float = Field(default=600.0, gt=0, strict=True)
    cleanup: float = Field(default=60.0, gt=0, strict=True)


class SandboxLimits(_Strict):
    """Resource limits of each attempt's container.

    Args:
        memory: memory (and memory + swap), e.g. `512m`, `2g`.
        cpus: CPUs, fractions allowed.
        pids: processes at once.
        workspace_size: size of the `/workspace` tmpfs (counts against memory).
    """

    memory: str = Field(default="512m", pattern=r"^\d+[bkmg]?$")
    cpus: float = Field(default=1.0, gt=0, le=64, strict=False)
    pids: int = Field(default=256, ge=8, le=100_000, strict=True)
    workspace_size: str = Field(default="512m", pattern=r"^\d+[bkmg]?$")


class ContainerTarget(_Strict):
    """Each item x trial runs in a fresh Docker container: the fixtures copied into `/workspace`,
    a scripted command (or an agent adapter) run there, the workspace diffed and exported to
    the store, scorers run while the container lives, then it is removed (docs/sandbox.md).

    Args:
        image: the image (a tag or id); the run records the image id the tag named at its start.
        command: the scripted command (argv), e.g. `["sh", "-c", "…"]`; `{prompt}` is replaced
            by the item's prompt; the prompt is also in the file `$ASSAY_PROMPT_FILE`.
        agent: instead of `command`, an agent adapter (`cli`, `claude-code`, `codex`) run headless.
        prompt: the item's prompt, a template over its fields.
        output: what the item's output is: `stdout` of the command (default), `report` (the
            agent's final report), or `file:<path>` (a file the attempt left in `/workspace`).
        fixtures: a folder (relative to the spec) copied into `/workspace`; may be a template,
            e.g. `fixtures/{id}`, for a folder per item.
        checks: a folder copied to `/assay/checks` only once the agent has finished, for
            scorers to run (the agent never sees it).
        user: who runs the command; default: the image's `USER`, else its first non-root account.
        env: plain environment variables of the command.
        secrets: names of host environment variables passed through a 0600 env file (never argv)
            and redacted from transcripts, diffs and the store.
        egress: hosts the attempt may reach through an allowlist proxy (`*.example.com`
            allowed); empty: network `none`.
        egress_proxy_image: an image with `python3` for the proxy sidecar.
        limits: see `SandboxLimits`.
        deadlines: see `StageDeadlines`.
    """

    kind: Literal["container"]
    image: str = Field(min_length=1)
    command: list[str] | None = Field(default=None, min_length=1)
    agent: AgentSpec | None = None
    prompt: str = "{input}"
    output: str = Field(default="stdout", pattern=r"^(stdout|report|file:.+)$")
    fixtures: str | None = None
    checks: str | None = None
    user: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    secrets: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(default_factory=list)
    egress: list[Annotated[str, Field(pattern=r"^(\*\.)?[A-Za-z0-9.\-]+(:\d+)?$")]] = Field(
        default_factory=list
    )
    egress_proxy_image: str | None = None
    limits: SandboxLimits = Field(default_factory=SandboxLimits)
    deadlines: StageDeadlines = Field(default_factory=StageDeadlines)

    @model_validator(mode="after")
    def _one_way_to_run(self) -> ContainerTarget:
        if (self.command is None) == (self.agent is None):
            raise ValueError("give exactly one of `command` (a scripted command) or `agent` (an adapter)")
        if self.output == "report" and self.agent is None:
            raise ValueError("output `report` needs an `agent` (a scripted command has no report)")
        if self.egress and not self.egress_proxy_image:
            raise ValueError("egress needs `egress_proxy_image`: an image with python3 for the proxy")
        return self


TargetSpec = Annotated[
    OpenAITarget | PythonTarget | HttpAgentTarget | ContainerTarget, Field(discriminator="kind")
]


class EvalSpec(_Strict):
    """One eval: a dataset, a target, scorers and how to run them.

    Args:
        name: the eval's name (runs are listed under it).
        dataset: see `DatasetSpec`.
        target: `openai`, `python` or `http_agent`.
        targets: instead of `target`, a matrix: named cells, each a target; every cell runs over
            the same items as its own run, under one matrix id.
        scorers: one or more scorers; names must be unique.
        concurrency: how many target calls the whole run has in flight at most.
        scorer_concurrency: how many scorers run at once on one item.
        trials: how many times each item is run.
        seed: recorded in the run's identity; passed to targets that take one.
        item_timeout: seconds one item (target call with its retries) may take; past it: `failed`.
        fail_on_item_error_rate: the run fails its gate when failed / attempted exceeds this (1 disables).
        budget: a USD limit on measured spend (`"$5"`, `"0.50"`); once reached no new item starts.
        prices: USD per million tokens by exact model name, laid over the shipped price table.
        capture_requests: `true`, or `{max_record_bytes, max_run_bytes, max_queue_bytes}`: every
            model call is stored as records in the `requests/` dataset, redacted.
        redact: regular expressions whose matches never reach captured records (API keys,
            bearer tokens and `sk-` keys are always redacted).
        policy: `module:function`, an async function driving each attempt's session with
            `start(prompt)` / `resume(prompt)` (docs/sessions.md); the spec's folder is importable.
            Without one, each attempt is one `start` with the item's prompt.
        attempts: run each item x trial up to this many times, each in a fresh session, stopping
            at the first attempt that passes; the best attempt is kept (docs/sessions.md).
        tags: free labels, stored on the run.
    """

    name: str = Field(min_length=1, pattern=r"^[\w.\-]+$")
    description: str | None = None
    dataset: DatasetSpec
    target: TargetSpec | None = None
    targets: dict[Annotated[str, Field(pattern=r"^[\w.\-]+$")], TargetSpec] | None = Field(
        default=None, min_length=1
    )
    scorers: list[ScorerSpec] = Field(min_length=1)
    # Numbers are strict: YAML reads `yes` / `true` as a boolean, which pydantic would otherwise
    # take as 1 (`fail_on_item_error_rate: true` silently disabling the gate).
    concurrency: int = Field(default=5, ge=1, le=10_000, strict=True)
    scorer_concurrency: int = Field(default=5, ge=1, le=1_000, strict=True)
    trials: int = Field(default=1, ge=1, le=1_000, strict=True)
    seed: int = Field(default=0, strict=True)
    item_timeout: float | None = Field(default=None, gt=0, strict=True)
    fail_on_item_error_rate: float = Field(default=0.05, ge=0, le=1, strict=True)
    budget: str | None = None
    prices: dict[str, Price] = Field(default_factory=dict)
    capture_requests: bool | CaptureSettings = False
    redact: list[str] = Field(default_factory=list)
    policy: str | None = Field(default=None, pattern=r"^[\w.]+:[\w.]+$")
    attempts: int = Field(default=1, ge=1, le=100, strict=True)
    tags: list[str] = Field(default_factory=list)

    @field_validator("redact")
    @classmethod
    def _patterns_compile(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"bad pattern {pattern!r}: {exc}") from None
        return patterns

    @property
    def capture_settings(self) -> CaptureSettings | None:
        if self.capture_requests is True:
            return CaptureSettings()
        return self.capture_requests or None

    @field_validator("budget", mode="before")
    @classmethod
    def _budget_is_usd(cls, value: Any) -> Any:
        if value is None:
            return None
        try:
            parse_budget(value)
        except SpecError as exc:
            raise ValueError(exc.problems[0]) from None
        return str(value)

    @property
    def budget_usd(self) -> float | None:
        return None if self.budget is None else parse_budget(self.budget)

    @field_validator("scorers")
    @classmethod
    def _unique_scorer_names(cls, scorers: list[Any]) -> list[Any]:
        # A field validator, so the problem is reported at `scorers` (with the positions), and
        # alongside any other problem in the spec.
        positions: dict[str, list[int]] = {}
        for index, scorer in enumerate(scorers):
            positions.setdefault(scorer.name, []).append(index)
        repeated = [
            f"{name!r} is used by " + " and ".join(f"scorers.{i}" for i in where)
            for name, where in positions.items()
            if len(where) > 1
        ]
        if repeated:
            raise ValueError(
                f"scorer names must be unique (they name the score columns): {'; '.join(repeated)}"
            )
        # Gauge rows sit beside score rows under the same `scorer` column: the prefix is theirs.
        reserved = [
            f"scorers.{i}: {s.name!r}" for i, s in enumerate(scorers) if s.name.startswith(GAUGE_PREFIX)
        ]
        if reserved:
            raise ValueError(
                f"scorer names may not start with {GAUGE_PREFIX!r} (reserved for gauges): {'; '.join(reserved)}"
            )
        return scorers

    @model_validator(mode="after")
    def _one_target_or_a_matrix(self) -> EvalSpec:
        if (self.target is None) == (self.targets is None):
            raise ValueError(
                "give either `target` or `targets` (a matrix of named cells), not both or neither"
            )
        return self

    def cells(self) -> list[tuple[str | None, EvalSpec]]:
        """The runs this spec makes: (None, itself), or (cell name, a spec with that cell's target)."""
        if self.targets is None:
            return [(None, self)]
        return [
            (name, self.model_copy(update={"target": t, "targets": None})) for name, t in self.targets.items()
        ]

    @property
    def sessions(self) -> bool:
        """Whether items run as managed sessions (a policy, or more than one attempt)."""
        return self.policy is not None or self.attempts > 1


_TARGET_KINDS = sorted(
    k for cls in get_args(get_args(TargetSpec)[0]) for k in get_args(cls.model_fields["kind"].annotation)
)

# What a `pattern=` constraint means, for people (the regex itself is no help).
_PATTERN_HINTS = {
    r"^[\w.\-]+$": "use only letters, digits, '_', '.' and '-'",
    r"^https?://": "must start with http:// or https://",
    r"^[\w.]+:[\w.]+$": "expected 'module:function'",
}

_MAX_REPR = 120


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_REPR else text[: _MAX_REPR - 3] + "..."


def _readable_loc(loc: tuple[Any, ...], data: Any) -> tuple[list[Any], Any]:
    """The error's location with union tags dropped (`target.openai.base_url` -> `target.base_url`),
    and the spec node that holds the field (for naming its allowed fields)."""
    path: list[Any] = []
    node, parent = data, None
    for part in loc:
        is_key = isinstance(node, dict) and part in node
        is_index = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
        if is_key or is_index:
            parent, node = node, node[part]
        elif isinstance(node, dict) and node.get("kind") == part:
            continue  # the discriminated union's tag, not a field of the spec
        else:
            parent, node = node, None
        path.append(part)
    return path, parent


def _allowed_fields(path: list[Any], parent: Any) -> list[str]:
    """The field names allowed where `path` (an unknown field) sits, when known."""
    models: list[type[BaseModel]] = []
    if len(path) == 1:
        models = [EvalSpec]
    elif path[:-1] == ["dataset"]:
        models = [DatasetSpec]
    elif isinstance(parent, dict) and (path[:-1] == ["target"] or (len(path) == 3 and path[0] == "scorers")):
        union = TargetSpec if path[0] == "target" else ScorerSpec
        for cls in _union_members(union):
            if parent.get("kind") in _kinds_of(cls):
                models = [cls]
    return sorted({f.alias or name for cls in models for name, f in cls.model_fields.items()})


def _union_members(union: Any) -> list[type[BaseModel]]:
    return list(get_args(get_args(union)[0]))


def _kinds_of(cls: type[BaseModel]) -> tuple[Any, ...]:
    return get_args(cls.model_fields["kind"].annotation)


def _describe(error: dict[str, Any], data: Any = None) -> str:
    """One line for one pydantic error: the field's path, what is wrong, and the bad value."""
    path, parent = _readable_loc(tuple(error["loc"]), data)
    where = ".".join(str(p) for p in path) or "(top level)"
    kind, message, value = error["type"], error["msg"], error.get("input")
    ctx = error.get("ctx") or {}
    if kind == "missing":
        return f"{where}: required field is missing"
    if kind == "extra_forbidden":
        allowed = _allowed_fields(path, parent)
        hint = ""
        if allowed:
            close = difflib.get_close_matches(str(path[-1]), allowed, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; allowed: {', '.join(allowed)}"
        return f"{where}: unknown field (value {_short(value)}){hint}"
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        discriminator = str(ctx.get("discriminator", "kind")).strip("'\"")
        kinds = SCORER_KINDS if path[:1] == ["scorers"] else _TARGET_KINDS
        allowed = ", ".join(kinds)
        if kind == "union_tag_not_found":
            return f"{where}.{discriminator}: required field is missing; one of: {allowed}"
        tag = value.get(discriminator) if isinstance(value, dict) else ctx.get("tag")
        return f"{where}.{discriminator}: unknown {discriminator} {_short(tag)}; one of: {allowed}"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"{where}: expected a mapping of fields, got {_short(value)}"
    if kind == "list_type":
        return f"{where}: expected a list, got {_short(value)}"
    if kind == "string_pattern_mismatch" and ctx.get("pattern") in _PATTERN_HINTS:
        return f"{where}: {_PATTERN_HINTS[ctx['pattern']]} (got {_short(value)})"
    if kind in ("value_error", "assertion_error"):
        message = message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
        # Validators name the bad value themselves; a whole mapping or list would only be noise.
        if isinstance(value, dict | list) or repr(value) in message:
            return f"{where}: {message}"
    return f"{where}: {message} (got {_short(value)})"


def parse_spec(data: Any, *, source: str = "spec") -> EvalSpec:
    """Validate an already-parsed spec document; raises `SpecError` listing every problem."""
    if data is None:
        raise SpecError(
            "the spec is empty: expected a mapping with name, dataset, target and scorers", source=source
        )
    if not isinstance(data, dict):
        raise SpecError(
            f"expected a mapping at the top level (name, dataset, target, scorers, ...), "
            f"got {type(data).__name__} {_short(data)}",
            source=source,
        )
    try:
        return EvalSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(describe_errors(exc, data), source=source) from None


def describe_errors(exc: ValidationError, data: Any = None) -> list[str]:
    """One readable line per problem of a pydantic validation error over `data`."""
    return [_describe(e, data) for e in exc.errors(include_url=False)]


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses a key repeated in one mapping (plain YAML keeps the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[no-untyped-call]
            try:
                first = seen.get(key)
            except TypeError:
                continue  # an unhashable key: the base class reports it
            if first is not None:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"duplicate key {key!r} (first at line {first.line + 1})",
                    key_node.start_mark,
                )
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def load_spec(path: str | Path) -> EvalSpec:
    """Read and validate a YAML (or JSON) spec file.

    Args:
        path: the spec file; relative paths inside it are relative to its folder.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except OSError as exc:
        raise SpecError(f"cannot read spec: {exc.strerror}", source=str(path)) from None
    except UnicodeDecodeError as exc:
        raise SpecError(f"cannot read spec: not UTF-8 text (byte {exc.start})", source=str(path)) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = ""
        if mark is not None:
            lines = text.splitlines()
            line = lines[mark.line].strip() if mark.line < len(lines) else ""
            where = f"line {mark.line + 1}, column {mark.column + 1}: "
            if line:
                where += f"{line[:_MAX_REPR]!r}: "
        raise SpecError(
            f"{where}not valid YAML: {getattr(exc, 'problem', None) or exc}", source=str(path)
        ) from None
    return parse_spec(data, source=str(path))
