"""What a spec's `target:` (or a matrix cell) may be: one model per target kind.

Each kind's behaviour lives in `assay.targets` (one module or package per kind); these are only
the validated settings, so the spec can be loaded and checked without importing any of them.
"""

from __future__ import annotations

import re
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import Discriminator, Field, Tag, field_validator, model_validator

from assay._templates import template_problem
from assay.calls.batch_mode import BatchOption
from assay.calls.endpoint import BaseURL, Endpoint, ModelEndpoint
from assay.calls.http import HttpURL
from assay.calls.messages import TextPart, Turn
from assay.calls.response_cache import check_cache
from assay.spec._base import StrictModel
from assay.spec._model_io import AnthropicThinking, OpenAIReasoning, RequestFields, ToolLoop

ParserName = Literal["jsonl", "claude-code", "codex", "text"]

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Characters docker's `--env-file` cannot carry inside a value: it reads one KEY=value per line.
ENV_UNWRITABLE = ("\n", "\r", "\x00")


def _template(value: str | None) -> str | None:
    """A prompt template must fill from named dataset fields: `{question}`, `{field[key]}`."""
    if value is not None and (problem := template_problem(value, example="dataset field, e.g. {question}")):
        raise ValueError(f"bad template {value!r}: {problem}")
    return value


class ConversationField(StrictModel):
    """`{field: messages}` among a chat target's `messages`: the item's own conversation, read from
    this dataset field (a list of turns, or its JSON text), put in at this place."""

    field: str = Field(min_length=1)
    """The dataset field that holds the conversation."""


def _entry_kind(value: object) -> str:
    named = (isinstance(value, dict) and "field" in value) or isinstance(value, ConversationField)
    return "field" if named else "turn"


MessageEntry = Annotated[
    Annotated[Turn, Tag("turn")] | Annotated[ConversationField, Tag("field")], Discriminator(_entry_kind)
]
Messages = list[MessageEntry] | None


def _messages_entries(value: object) -> object:
    """`messages: {field: name}` alone is a list of that one entry."""
    return [value] if isinstance(value, dict) else value


def _check_messages(spec: OpenAITarget | AnthropicTarget) -> None:
    """A spec's turns are templates that must parse; `prompt` and `messages` are two ways to say
    what is asked, not one to add to the other."""
    if spec.messages is None:
        return
    if not spec.messages:
        raise ValueError("messages is empty: list turns, or `{field: <dataset field>}`")
    # A stored spec (`runs.spec_json`) writes every field, the default prompt too: read back (a
    # rescore, the report) it must validate as the spec it was.
    if "prompt" in spec.model_fields_set and spec.prompt != type(spec).model_fields["prompt"].default:
        raise ValueError(
            "give `prompt` or `messages`, not both: with messages, ask the question as their last "
            'turn, e.g. `{role: user, content: "{question}"}`'
        )
    for n, entry in enumerate(spec.messages):
        if not isinstance(entry, Turn):
            continue
        texts = (
            [entry.content]
            if isinstance(entry.content, str)
            else [part.text if isinstance(part, TextPart) else part.path for part in entry.content]
        )
        for text in texts:
            if text is not None and (
                problem := template_problem(text, example="dataset field, e.g. {question}")
            ):
                raise ValueError(f"messages.{n}: bad template {text!r}: {problem}")


def _batch_alone(spec: OpenAITarget | AnthropicTarget) -> None:
    if spec.batch is not None and (spec.stream or spec.cache):
        raise ValueError("batch cannot be combined with stream or cache")


# The Responses API's words for fields the spec sets: `params` may not set them behind its back.
_RESPONSES_MODELLED = {
    "input": "prompt (or messages)",
    "instructions": "system",
    "max_output_tokens": "max_completion_tokens (or max_tokens)",
    "reasoning": "reasoning_effort",
    "text": "response_format",
    "store": "api (a Responses request is never stored)",
}


def _responses_rules(spec: OpenAITarget) -> None:
    for key in spec.params or {}:
        if key in _RESPONSES_MODELLED:
            raise ValueError(
                f"params.{key}: Assay sets this field; use the target's `{_RESPONSES_MODELLED[key]}`"
            )


class OpenAITarget(ModelEndpoint, RequestFields, ToolLoop, OpenAIReasoning):
    """Any OpenAI-compatible chat-completions endpoint; its endpoint fields (`base_url`, the key,
    `timeout`, `max_retries`, `response_headers`, `rate_limits`) are `ModelEndpoint`'s.

    Args:
        kind: `openai`.
        base_url: e.g. `http://127.0.0.1:8000/v1`; `/chat/completions` is appended (`/responses`
            with `api: responses`).
        api: `chat_completions` (the default) or `responses`: OpenAI's Responses API
            (docs/responses-api.md), the same fields sent in its words (`instructions`, `input`,
            `text.format`, `reasoning.effort`, `max_output_tokens`); no `seed` (it takes none).
            With `batch`, a batch of `/v1/responses` requests.
        model: the exact model version (a moving alias makes runs unrepeatable).
        prompt: a template formatted with the item's fields, e.g. `"{question}"`.
        messages: instead of `prompt`, the conversation sent (docs/conversations.md): turns
            `{role, content}` (templates; content text or parts: text, images, documents), and
            `{field: <name>}` where the item's own conversation goes; `{field: <name>}` alone
            sends the dataset field's conversation as it is.
        system: an optional system prompt (also a template).
        temperature, max_tokens: passed through when set.
        cache: `true` answers repeated requests from the store's response cache (needs
            `temperature: 0`); `always` caches whatever the temperature.
        stream: ask for the reply as a stream (with `stream_options.include_usage`), so the
            time to its first token is measured (`items.first_token_ms`).
        batch: `true` or `{max_requests, max_wait_s, poll_s, max_batches}`: send the items'
            requests through OpenAI's Batch API, at batch prices (needs `max_tokens`, which bounds
            what a batch may cost); see the `anthropic` target.
    """

    kind: Literal["openai"]
    api: Literal["chat_completions", "responses"] = "chat_completions"
    model: str = Field(min_length=1)
    prompt: str = "{input}"
    messages: Messages = None
    system: str | None = None
    temperature: float | None = Field(default=None, ge=0, le=2, strict=True)
    max_tokens: int | None = Field(default=None, ge=1, strict=True)
    cache: bool | Literal["always"] = False
    stream: bool = False
    batch: BatchOption = None

    @model_validator(mode="after")
    def _cache_needs_greedy_sampling(self) -> OpenAITarget:
        check_cache(self.cache, self.temperature)
        _batch_alone(self)
        _check_messages(self)
        if self.api == "responses":
            _responses_rules(self)
        if self.batch is not None and self.max_tokens is None and self.max_completion_tokens is None:
            raise ValueError(
                "batch needs max_tokens (or max_completion_tokens): it bounds what a batch may cost"
                " until its results arrive"
            )
        return self

    @field_validator("prompt", "system")
    @classmethod
    def _template_parses(cls, value: str | None) -> str | None:
        return _template(value)

    @field_validator("messages", mode="before")
    @classmethod
    def _one_entry(cls, value: object) -> object:
        return _messages_entries(value)


class AnthropicTarget(ModelEndpoint, RequestFields, ToolLoop, AnthropicThinking):
    """Anthropic's Messages API, natively (`POST {base_url}/messages`); its endpoint fields are
    `ModelEndpoint`'s, as for `openai`.

    Args:
        kind: `anthropic`.
        base_url: default `https://api.anthropic.com/v1`; `/messages` is appended.
        model: the exact, dated model version (`claude-sonnet-4-5-20250929`); a moving alias
            (`claude-sonnet-4-5`, `…-latest`) is refused before the run starts.
        api_key_env: the environment variable holding the API key, sent as `x-api-key`; the key
            itself is never stored.
        anthropic_version: the `anthropic-version` header.
        prompt: a template formatted with the item's fields, e.g. `"{question}"`.
        messages: as for `openai`; the leading system turns become the request's `system` (after
            `system`), and the rest must alternate user and assistant, from a user turn.
        system: an optional system prompt (also a template).
        max_tokens: the reply's limit (the Messages API requires one).
        temperature: sampling temperature, 0 to 1.
        stop_sequences: texts that end the reply.
        cache_system: mark the system prompt for Anthropic's prompt cache (`cache_control`):
            later calls read it at the cache price (`tokens_cached`), the first writes it
            (`tokens_cache_write`).
        stream: ask for the reply as a stream, so the time to its first token is measured.
        batch: `true` or `{max_requests, max_wait_s, poll_s, max_batches}`: send the items' requests through
            the Message Batches API, at batch prices; each batch is recorded in the store's
            `batches/` the moment it is accepted, so `assay resume` re-attaches to it and never
            submits a request twice. (A session's turns are sent online.)
        max_retries: retries after the first attempt on a retryable status (429, 529 overloaded,
            5xx; `assay.calls.http`), a timeout, a connection error or a broken stream; refusals
            for rate (429, 529) are waited out beyond it.
        cache: as for `openai`: answer repeated requests from the store's response cache.
        rate_limits: as for `openai` (the adaptive controller reads Anthropic's
            `anthropic-ratelimit-requests-*` headers).
    """

    kind: Literal["anthropic"]
    base_url: BaseURL = "https://api.anthropic.com/v1"
    model: str = Field(min_length=1)
    anthropic_version: str = Field(default="2023-06-01", min_length=1)
    prompt: str = "{input}"
    messages: Messages = None
    system: str | None = None
    max_tokens: int = Field(ge=1, strict=True)
    temperature: float | None = Field(default=None, ge=0, le=1, strict=True)
    stop_sequences: list[Annotated[str, Field(min_length=1)]] | None = None
    cache_system: bool = False
    stream: bool = False
    batch: BatchOption = None
    cache: bool | Literal["always"] = False

    @model_validator(mode="after")
    def _cache_needs_greedy_sampling(self) -> AnthropicTarget:
        check_cache(self.cache, self.temperature)
        _batch_alone(self)
        _check_messages(self)
        if self.cache_system and self.system is None and not self._system_turns():
            raise ValueError("cache_system needs a `system` prompt (or system turns) to cache")
        if self.response_format is not None:
            if self.response_format.type == "json_object":
                raise ValueError("response_format: the Messages API has no JSON mode; give a json_schema")
            if self.tools is not None and self.response_format.structured:
                raise ValueError(
                    "response_format is the answer on anthropic (a forced tool, or with `strict: true` "
                    "the native structured output): it cannot be combined with `tools`"
                )
        return self

    def _system_turns(self) -> bool:
        return any(isinstance(e, Turn) and e.role == "system" for e in self.messages or [])

    @field_validator("prompt", "system")
    @classmethod
    def _template_parses(cls, value: str | None) -> str | None:
        return _template(value)

    @field_validator("messages", mode="before")
    @classmethod
    def _one_entry(cls, value: object) -> object:
        return _messages_entries(value)


class PythonTarget(StrictModel):
    """A Python function `module:function`, sync or async, called with the item's input.

    Args:
        kind: `python`.
        function: `module:function`; the spec's folder is importable. It returns the output, or
            `{output, cost, metadata}` (the cost kept as caller-reported).
    """

    kind: Literal["python"]
    function: str = Field(pattern=r"^[\w.]+:[\w.]+$")


class HttpAgentTarget(Endpoint):
    """An agent behind an HTTP harness speaking Assay's harness protocol (docs/harness-protocol.md):
    `POST /runs` per item x trial, then `GET /runs/{id}` until it ends. Its spend is not measured
    by Assay: the cost it reports in its trajectory is kept as caller-reported cost. Its endpoint
    fields are `Endpoint`'s, but for `timeout`, which bounds a whole harness run
    (`request_timeout` bounds one request).

    Args:
        kind: `http_agent`.
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
        max_retries: retries of one request after a retryable status (408, 409, 429, 5xx;
            `assay.calls.http`) or, except for a start, a timeout or connection error.
        max_artifact_bytes: the largest artifact downloaded into the store (bytes); a larger
            one is skipped with a warning. 0 downloads none.
        max_attempt_bytes: the most artifact bytes one attempt downloads, all files together;
            a file that would pass it is skipped with a warning.
    """

    attempt_timeout_field: ClassVar[str] = "request_timeout"

    kind: Literal["http_agent"]
    model: str | None = Field(default=None, min_length=1)
    poll_interval: float = Field(default=0.2, gt=0, le=60, strict=True)
    timeout: float = Field(default=600.0, gt=0, strict=True)
    request_timeout: float = Field(default=30.0, gt=0, strict=True)
    max_artifact_bytes: int = Field(default=16 * 2**20, ge=0, strict=True)
    max_attempt_bytes: int = Field(default=64 * 2**20, ge=0, strict=True)


class StageDeadlines(StrictModel):
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


class SandboxLimits(StrictModel):
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


class AgentSpec(StrictModel):
    """The agent a container runs.

    Args:
        adapter: `cli`, `claude-code` or `codex`. Checked by `preflight`, which names the known ones.
        model: the exact model version, e.g. `claude-sonnet-4-20250514` (see `model_pin_problem`).
            Required by the built-ins, and by a `cli` command that uses `{model}`.
        command: the argv template: `{prompt}`, `{model}` and `{prompt_file}` are filled in, `{{`
            and `}}` are literal braces. Required for `cli`; replaces a built-in's default line.
        env: plain, non-secret environment for the agent.
        secrets: names of host environment variables whose values reach the container only
            through the env-file (the built-ins add their provider key).
        parser: how stdout is read; default per adapter (`cli`: `text`).
        base_url: the model endpoint the built-in adapter's CLI talks to instead of its
            provider's (a gateway, a local server), e.g. `http://10.0.0.5:8000/v1` for Codex
            (its Responses API root) or `http://10.0.0.5:8000` for Claude Code (`ANTHROPIC_BASE_URL`).
            With `target.egress` its host joins the allowlist in place of the provider's.
    """

    adapter: str = Field(min_length=1)
    model: str | None = None
    base_url: HttpURL | None = None
    command: list[str] | None = Field(default=None, min_length=1)
    env: dict[str, str] = Field(default_factory=dict)
    secrets: list[str] = Field(default_factory=list)
    parser: ParserName | None = None

    @field_validator("env")
    @classmethod
    def _plain_env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, text in value.items():
            if not ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name (letters, digits, _)")
            if any(c in text for c in ENV_UNWRITABLE):
                raise ValueError(f"the value of {name} holds a line break or NUL, which no env-file carries")
        return value

    @field_validator("secrets")
    @classmethod
    def _secret_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not ENV_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not an environment variable name (letters, digits, _)")
        return value


class ContainerTarget(StrictModel):
    """Each item x trial runs in a fresh Docker container: the fixtures copied into `/workspace`,
    a scripted command (or an agent adapter) run there, the workspace diffed and exported to
    the store, scorers run while the container lives, then it is removed (docs/sandbox.md).

    Args:
        kind: `container`.
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
        egress_network: the Docker network the proxy sidecar reaches the allowed hosts on: the
            engine's default `bridge` unless named (one of yours, where a model server runs).
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
    egress_network: str = Field(default="bridge", min_length=1)
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
    OpenAITarget | AnthropicTarget | PythonTarget | HttpAgentTarget | ContainerTarget,
    Field(discriminator="kind"),
]


TARGET_KINDS = sorted(
    k for cls in get_args(get_args(TargetSpec)[0]) for k in get_args(cls.model_fields["kind"].annotation)
)
