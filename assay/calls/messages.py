"""A conversation's parts in one vocabulary for both chat APIs: what Assay sends a model and what
it reads back of a reply, before either is put on a provider's wire (`assay.calls.wire`).

The vocabulary: the tool call, which replies, stored items and scorers share; a conversation's
turns and their content parts (text, images, documents), which a chat target's `messages:` lists
and a dataset field may hold; the tools a request offers (`FunctionTool`, from a spec or a Python
callable: `function_tool`), how the model may choose among them (`ToolChoice`), what a reply
must be (`ResponseFormat`: structured output), and what running a call gave (`ToolResult`, which a
tool loop sends back).
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model, field_validator, model_validator


class ToolCall(BaseModel):
    """One function call a model made (OpenAI `tool_calls[]`, Anthropic `tool_use` blocks, an
    agent's ATIF `tool_calls[]`), the same whoever made it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """The function called."""
    arguments: Any = None
    """The arguments as the model wrote them, parsed from JSON (an object, normally); when what the
    model wrote is not JSON, the string as written, so a scorer can fail it rather than guess."""
    id: str | None = None
    """The provider's id of the call (`call_…`, `toolu_…`): the tool's result names it."""


# -- turns and their content parts (issue 26 §1, §2) --------------------------------------------

Role = Literal["system", "user", "assistant"]


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class TextPart(_Part):
    """Text in a turn (`{type: text, text}`); in a spec's turns, a template over the item's fields."""

    type: Literal["text"]
    """`text`."""
    text: str
    """The text (empty is refused when the conversation is checked)."""


class _MediaPart(_Part):
    """A file given to the model: exactly one of `path`, `url` or `data`."""

    path: str | None = None
    """A file, relative to the dataset file's folder (a template in a spec's turns, e.g.
    `images/{image}`); its bytes are read, checked and sent inline, and are part of the run's
    identity."""
    url: str | None = None
    """An `http(s)://` address the provider fetches itself (Assay never does: only the address is
    part of the run's identity)."""
    data: str | None = None
    """The bytes, base64-encoded, or a `data:<media type>;base64,…` URL."""
    media_type: str | None = None
    """The bytes' type (`image/png`); read from the bytes' magic when not given, and checked
    against them when it is."""

    @model_validator(mode="after")
    def _one_source(self) -> _MediaPart:
        given = [name for name in ("path", "url", "data") if getattr(self, name) is not None]
        if len(given) != 1:
            raise ValueError(
                f"give exactly one of path, url or data (got {', '.join(given) if given else 'none'})"
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError(f"url must be an http(s):// address (got {self.url[:40]!r}); bytes go in `data`")
        return self


class ImagePart(_MediaPart):
    """An image (`{type: image, path|url|data, media_type}`): PNG, JPEG, GIF or WebP; sent as
    OpenAI's `image_url` (a data URL) and Anthropic's `image` block."""

    type: Literal["image"]
    """`image`: PNG, JPEG, GIF or WebP."""


class DocumentPart(_MediaPart):
    """A PDF (`{type: document, path|url|data}`): Anthropic's `document` block, OpenAI's `file` part
    (inline data only)."""

    type: Literal["document"]
    """`document`: a PDF."""


ContentPart = Annotated[TextPart | ImagePart | DocumentPart, Field(discriminator="type")]
"""One part of a turn's content."""


class Turn(BaseModel):
    """One message of a conversation (`{role, content}`), as a spec's `messages:` lists them (a
    template) or a dataset field holds them (as written)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    """`system`, `user` or `assistant`. (Tool results come with tool calls, not as turns here.)"""
    content: str | list[ContentPart]
    """Text, or a list of parts (text, images, documents); an image or document only in a user turn."""

    @field_validator("role", mode="before")
    @classmethod
    def _known_role(cls, value: Any) -> Any:
        if value == "tool":
            raise ValueError(
                "a `tool` turn is not accepted in messages: tool results belong to a tool call, "
                "which a conversation written here cannot carry"
            )
        return value

    def text(self) -> str:
        """The turn's text: its content, or its text parts joined by blank lines."""
        if isinstance(self.content, str):
            return self.content
        return "\n\n".join(part.text for part in self.content if isinstance(part, TextPart))


# -- tools a request offers, and how it lets the model choose (the tools26 part) -----------------

TOOL_NAME = r"^[A-Za-z0-9_-]{1,64}$"
"""A function's name as both APIs accept it."""

# The sections of a Google-style docstring that end its description and its `Args:`.
_SECTIONS = re.compile(r"^\s*(Args|Arguments|Parameters|Returns|Yields|Raises|Examples?|Notes?):\s*$")
_ARG = re.compile(r"^(\s*)(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


class FunctionTool(BaseModel):
    """A function the model may call, as a spec's `tools:` defines it (or as a Python callable's
    signature and docstring give it: `function_tool`); each chat API puts it on its own wire
    (OpenAI `{type: function, function: {...}}`, Anthropic `{name, description, input_schema}`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=TOOL_NAME)
    """The function's name, as the model calls it: letters, digits, `_` and `-`, at most 64."""
    description: str | None = None
    """What the function does, for the model to decide when to call it."""
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    """Its arguments as a JSON schema of an object (`{type: object, properties: {...}, required: [...]}`)."""
    strict: bool | None = None
    """OpenAI's strict mode: the arguments are held to the schema exactly (the schema must then
    list every property as required and set `additionalProperties: false`). Anthropic has none:
    sent to OpenAI only."""

    @field_validator("parameters")
    @classmethod
    def _an_object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError(
                "must be the JSON schema of an object (`type: object`): a call's arguments are named"
            )
        return value


class NamedTool(BaseModel):
    """`tool_choice: {name: f}`: the model must call the function `f`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(pattern=TOOL_NAME)
    """The function the model must call (one of the request's `tools`)."""


ToolChoice = Literal["auto", "none", "required"] | NamedTool
"""How the model may choose among the tools: `auto` (call some or answer in words), `none` (call
none), `required` (call at least one), or `{name: f}` (call `f`)."""


def function_tool(function: Callable[..., Any]) -> FunctionTool:
    """The tool a Python function is: its name, its docstring's description, and its parameters'
    JSON schema from their annotations and defaults (pydantic), each described by the docstring's
    `Args:` line for it.

    Raises:
        TypeError: the function takes `*args` or `**kwargs` (a tool's arguments are named).
    """
    described, about = _docstring(inspect.getdoc(function) or "")
    fields: dict[str, Any] = {}
    for name, parameter in inspect.signature(function).parameters.items():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
            raise TypeError(f"{function.__qualname__} takes *{name}: a tool's arguments must be named")
        annotation = Any if parameter.annotation is parameter.empty else parameter.annotation
        default = ... if parameter.default is parameter.empty else parameter.default
        fields[name] = (annotation, Field(default, description=about.get(name)))
    arguments = create_model(f"{function.__name__}_arguments", **fields)
    schema = arguments.model_json_schema()
    schema.pop("title", None)
    for field_schema in schema.get("properties", {}).values():
        field_schema.pop("title", None)
    return FunctionTool(name=function.__name__, description=described or None, parameters=schema)


def _docstring(text: str) -> tuple[str, dict[str, str]]:
    """A Google-style docstring's description (before its first section) and its `Args:` lines
    by parameter (a line's continuation joined to it)."""
    description: list[str] = []
    about: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    indent = 0
    for line in text.splitlines():
        if match := _SECTIONS.match(line):
            section, current = match.group(1), None
            continue
        if section is None:
            description.append(line)
        elif section in ("Args", "Arguments", "Parameters") and line.strip():
            arg = _ARG.match(line)
            if arg and (current is None or len(arg.group(1)) <= indent):
                current, indent = arg.group(2).lstrip("*"), len(arg.group(1))
                about[current] = arg.group(3).strip()
            elif current is not None:
                about[current] = f"{about[current]} {line.strip()}".strip()
    return " ".join(" ".join(description).split()), about


class JsonSchemaFormat(BaseModel):
    """The schema a structured reply must follow (`response_format: {type: json_schema, json_schema: ...}`)."""

    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True, populate_by_name=True)

    name: str = Field(pattern=TOOL_NAME)
    """The schema's name (letters, digits, `_` and `-`, at most 64): OpenAI's `json_schema.name`;
    on Anthropic, the name of the tool the reply is forced through."""
    # `schema_`, because `schema` shadows a (deprecated) BaseModel method.
    schema_: dict[str, Any] = Field(alias="schema")
    """The JSON schema of the reply: an object's (`type: object`)."""
    description: str | None = None
    """What the reply is, for the model."""
    strict: bool | None = None
    """Strict mode: the reply is held to the schema exactly. OpenAI's `strict`; on Anthropic, its
    native structured output (`output_config.format`, for the models that take it) instead of a
    forced tool."""

    @field_validator("schema_")
    @classmethod
    def _an_object_schema(cls, value: dict[str, Any]) -> dict[str, Any]:
        if value.get("type") != "object":
            raise ValueError("must be the JSON schema of an object (`type: object`)")
        return value


class ResponseFormat(BaseModel):
    """What a reply must be: JSON following a schema (`json_schema`), any JSON object
    (`json_object`, OpenAI's JSON mode), or text (the default)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["json_schema", "json_object", "text"]
    """`json_schema` (with `json_schema:`), `json_object` or `text`."""
    json_schema: JsonSchemaFormat | None = None
    """The schema, for `type: json_schema`."""

    @model_validator(mode="after")
    def _schema_with_its_type(self) -> ResponseFormat:
        if (self.type == "json_schema") != (self.json_schema is not None):
            raise ValueError("`json_schema:` goes with `type: json_schema`, and only with it")
        return self

    @property
    def structured(self) -> bool:
        """Whether the reply is JSON (its content parsed into the item's output)."""
        return self.type != "text"


# -- a tool's result, sent back to the model (the loop26 part: a tool loop) ----------------------


class ToolResult(BaseModel):
    """What running one of the model's tool calls gave, to be sent back to it (OpenAI a `tool`
    message, Anthropic a `tool_result` block)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    call_id: str
    """The id of the call it answers (`call_…`, `toolu_…`)."""
    content: str
    """The result as text (a tool's return value; JSON when it is not text), or the error."""
    is_error: bool = False
    """The tool raised or timed out: `content` says how (Anthropic's `is_error: true`; OpenAI has
    no flag, the text says it)."""
