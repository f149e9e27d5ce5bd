"""The `llm_judge` scorer: a model grades each output against a rubric.

The rubric is a template over the item (`{input}`, `{output}`, `{expected}`, the annotations'
keys, the dataset row's fields, and `{scale}`, which describes the scale in words). The judge's
reply is read robustly: a JSON object `{"score": ..., "explanation": ...}` first (bare, in a
```json fence, or embedded in text), else a labelled number (`Score: 7/10`, `score = 0.8`,
`Rating: [[4]]`), else `8 out of 10`, else a reply that is only a number. A reply with no score,
or one off the scale, fails the scorer; the raw reply is kept in the score's metadata.

Calls go through `assay.calls.chat.ChatClient`, so each is measured into the ledger the executor opens
around the scorer (judging spend, priced with the run's price table) and admitted by the run's
budget: a refused call raises `BudgetDenied`, which `evaluate` records as `budget_interrupted`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import string
import weakref
from collections.abc import AsyncIterator, Callable
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from assay.calls.chat import ChatClient
from assay.calls.http import HttpURL
from assay.calls.response_cache import check_cache
from assay.errors import JudgeError, TargetFailure
from evaluators._base import Sample, Score, Scorer

SCALE_UNIT = "0-1"
_RAW_IN_ERROR = 500
_RAW_IN_METADATA = 2000
_MAX_PARSED = 20_000  # replies are bounded by max_tokens; this only caps pathological ones

DEFAULT_RUBRIC = """\
You are an impartial grader. Grade the answer an AI model gave to the question below.

[Question]
{input}

[Reference answer]
{expected}

[Model's answer]
{output}

Judge the model's answer on correctness first (against the reference answer, when one is given), \
then on completeness and clarity. Score it on {scale}.
Reply with a JSON object and nothing else: {{"score": <number>, "explanation": "<one or two sentences>"}}"""

_NUM = r"[-+]?(?:\d+(?:\.\d+)?|\.\d+)"
# "/ 10", "out of 10", or "%", after the score.
_OF = rf"(?:\s*(?:/|out\s+of)\s*({_NUM})|\s*(%))?"
_LABEL = r"(?:(?:final|overall|total)\s+)?(?:score|rating|grade)"
# "Score (1-10): 7", "Rating (out of 5): 4".
_ASIDE = r"(?:\s*\([^)\n]{0,20}\))?"
# Between the label and the number: markdown emphasis, quotes, brackets, and ":", "=", "is" or "of".
_GAP = r"[\s*_`\"'\[(]*(?:[:=]|\bis\b|\bof\b)?[\s*_`\"'\[(]*"
# A label at the start of a line ("**Final score:** 7") is the judge's verdict; one in the middle of
# a sentence ("a score of 10 would need...") may be reasoning, so it ranks below.
_LINE_LABELLED = re.compile(rf"^[\W_]*{_LABEL}\b{_ASIDE}{_GAP}({_NUM}){_OF}", re.IGNORECASE | re.MULTILINE)
_LABELLED = re.compile(rf"\b{_LABEL}\b{_ASIDE}{_GAP}({_NUM}){_OF}", re.IGNORECASE)
_OUT_OF = re.compile(rf"(?<![\w.])({_NUM})\s*(?:/|out\s+of)\s*({_NUM})(?![\w]|\.\d)()", re.IGNORECASE)
_BARE = re.compile(rf"\A[\s*_`\"'\[(]*({_NUM}){_OF}[\s*_`\"'\])]*\.?\s*\Z")
_FENCE = re.compile(r"```[\w-]*[ \t]*\n?(.*?)```", re.DOTALL)
_SCORE_KEYS = ("score", "rating", "grade")
_EXPLANATION_KEYS = ("explanation", "reasoning", "reason", "rationale", "justification")


class _Clients:
    """One `ChatClient` per event loop (a client's connections belong to the loop that opened
    them). Copies and pickles start empty, and it never makes two scorer specs unequal."""

    def __init__(self) -> None:
        self.by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, tuple[ChatClient, Any]] = (
            weakref.WeakKeyDictionary()
        )

    def __copy__(self) -> _Clients:
        return self  # a shallow copy of the spec (a matrix cell) may share them

    def __deepcopy__(self, memo: dict[int, Any]) -> _Clients:
        return _Clients()

    def __reduce__(self) -> tuple[type[_Clients], tuple[()]]:
        return _Clients, ()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Clients)

    __hash__ = object.__hash__


async def _closed_with_the_loop(client: ChatClient, forget: Callable[[], object]) -> AsyncIterator[None]:
    # Started once and left suspended: the loop tracks it, and `asyncio.run` (like any loop
    # calling `shutdown_asyncgens`) closes it before closing itself, running this `finally` while
    # the loop can still close the client's connections cleanly. `forget` drops the client from
    # its table, which would otherwise keep the closed loop alive (this generator refers to it).
    try:
        yield
    finally:
        forget()
        await client.aclose()


def _template_problem(template: str) -> str | None:
    """Why `template` cannot be rendered with named fields, or None when it can."""
    try:
        names = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as exc:
        return str(exc)
    for name in names:
        head = re.split(r"[.\[]", name, maxsplit=1)[0]
        if head == "" or head.isdigit():
            return f"positional field {{{name}}} cannot be filled; name a field, e.g. {{output}}"
        if "." in name.split("[", 1)[0]:
            return f"attribute access in {{{name}}} is not supported; use {{field[key]}} for nested values"
    return None


class _Value:
    """A value as a rubric shows it: text as is, None as "(none)", anything else as JSON;
    `{field[key]}` indexes into it."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __getitem__(self, key: Any) -> _Value:
        return _Value(self.value[key])

    def __str__(self) -> str:
        if isinstance(self.value, str):
            return self.value
        if self.value is None:
            return "(none)"
        return json.dumps(self.value, ensure_ascii=False, default=str)

    def __repr__(self) -> str:
        return repr(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)


def _reply_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return "" if content is None else str(content)


def _find_json_verdict(text: str) -> dict[str, Any] | None:
    """The first JSON object in `text` with a score key: the whole reply, a fenced block, or an
    object embedded in prose."""
    candidates = [text.strip(), *(m[1].strip() for m in _FENCE.finditer(text))]
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict) and _score_key(value) is not None:
            return value
    decoder = json.JSONDecoder()
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict) and _score_key(value) is not None:
            return value
        start = text.find("{", start + 1)
    return None


def _score_key(obj: dict[str, Any]) -> str | None:
    keys = {str(k).lower(): k for k in obj}
    return next((keys[k] for k in _SCORE_KEYS if k in keys), None)


def _read_text_score(text: str) -> tuple[float, float | None] | None:
    """(number, denominator or None) read from prose, by the most telling pattern found."""
    if match := _BARE.match(text):
        return _with_denominator(match)
    for pattern in (_LINE_LABELLED, _LABELLED, _OUT_OF):
        matches = list(pattern.finditer(text))
        if matches:
            return _with_denominator(matches[-1])  # the last verdict: judges reason, then conclude
    return None


def _with_denominator(match: re.Match[str]) -> tuple[float, float | None]:
    number, of, percent = match.group(1), match.group(2), match.group(3)
    if percent:
        return float(number), 100.0
    return float(number), (float(of) if of else None)


class LlmJudge(Scorer):
    """A model grades the output against a rubric; its score is mapped to [0, 1].

    Args:
        base_url: an OpenAI-compatible endpoint, e.g. `https://api.openai.com/v1`.
        model: the judge's exact model version (a moving alias makes scores unrepeatable).
        api_key_env: the environment variable holding the API key; the key is never stored.
        rubric: the judge's prompt, a template over `{input}`, `{output}`, `{expected}`, `{scale}`
            (the scale in words), the item's annotations and the dataset row's fields (those four
            names win over an annotation of the same name). The default asks for correctness,
            completeness and clarity, and a JSON reply with a score and an explanation.
        system: an optional system prompt (a template like the rubric).
        scale: `"0-1"` (scores in [0, 1], taken as is), or N (or `"1-N"`), N >= 2: whole scores
            1..N, mapped to [0, 1] by (s - 1) / (N - 1). On the 0-1 scale "7/10" and "70%" read
            as fractions; on a 1-N scale a stated denominator must be N.
        temperature: sampling temperature (default 0); null leaves it to the provider.
        max_tokens: the judge's reply limit (default 512); null leaves it to the provider.
        timeout: seconds for one HTTP attempt.
        max_retries: retries after the first attempt on 429 / 5xx / timeouts / connection errors.
        concurrency: the connection pool's width (judge calls in flight are bounded by the run's
            concurrency and `scorer_concurrency`).
        gold_check: the judge self-check (`Scorer.gold_check`), on by default; `false` turns it
            off. On by default it is skipped when the dataset has no expected answer.
    """

    version: ClassVar[str] = "1"
    deterministic: ClassVar[bool] = False
    operational: ClassVar[frozenset[str]] = frozenset(
        {"base_url", "api_key_env", "timeout", "max_retries", "concurrency", "cache", "gold_check"}
    )

    kind: Literal["llm_judge"] = "llm_judge"
    base_url: HttpURL
    model: str = Field(min_length=1)
    api_key_env: str | None = Field(default=None, min_length=1)
    rubric: str = Field(default=DEFAULT_RUBRIC, min_length=1)
    system: str | None = None
    scale: Literal["0-1"] | int = SCALE_UNIT
    temperature: float | None = Field(default=0.0, ge=0, le=2, strict=True)
    max_tokens: int | None = Field(default=512, ge=1, strict=True)
    cache: bool | Literal["always"] = False
    timeout: float = Field(default=60.0, gt=0, strict=True)
    max_retries: int = Field(default=4, ge=0, le=20, strict=True)
    concurrency: int = Field(default=16, ge=1, le=10_000, strict=True)
    # On by default, as agent-bench's `verifyJudge`: a judge that cannot recognise the gold answer
    # makes every score meaningless, and finding out costs one call.
    gold_check: bool = True

    _clients: _Clients = PrivateAttr(default_factory=_Clients)

    @model_validator(mode="after")
    def _cache_needs_greedy_sampling(self) -> LlmJudge:
        check_cache(self.cache, self.temperature)
        return self

    @field_validator("rubric", "system")
    @classmethod
    def _template_parses(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and (problem := _template_problem(value)):
            cut = value if len(value) <= 80 else value[:77] + "..."
            raise ValueError(f"bad {info.field_name} template {cut!r}: {problem}")
        return value

    @field_validator("scale", mode="before")
    @classmethod
    def _scale(cls, value: Any) -> Any:
        if isinstance(value, str) and (match := re.fullmatch(r"\s*1\s*-\s*(\d+)\s*", value)):
            value = int(match[1])
        if value == SCALE_UNIT:
            return value
        if isinstance(value, bool) or not isinstance(value, int) or not 2 <= value <= 1000:
            raise ValueError(
                f'scale must be "0-1" or a whole number N from 2 to 1000 (a 1-N scale), got {value!r}'
            )
        return value

    # -- rendering ---------------------------------------------------------------------------------

    def _scale_words(self) -> str:
        if self.scale == SCALE_UNIT:
            return "a scale from 0 (worst) to 1 (best); fractions such as 0.5 are allowed"
        return f"a scale of whole numbers from 1 (worst) to {self.scale} (best)"

    def _render(self, template: str, sample: Sample, what: str) -> str:
        values = {**sample.fields, **sample.annotations}
        values.update(input=sample.input, output=sample.output, expected=sample.expected)
        namespace = {key: _Value(value) for key, value in values.items()}
        namespace["scale"] = _Value(self._scale_words())
        try:
            return template.format_map(namespace)
        except KeyError as exc:
            known = ", ".join(sorted(namespace))
            raise ValueError(
                f"{what} names {{{exc.args[0]}}}, which this item lacks; it has: {known}"
            ) from None
        except (IndexError, TypeError, ValueError) as exc:
            raise ValueError(f"{what} cannot be filled for this item: {type(exc).__name__} {exc}") from None

    def request_body(self, sample: Sample) -> dict[str, Any]:
        messages = []
        if self.system is not None:
            messages.append({"role": "system", "content": self._render(self.system, sample, "system")})
        messages.append({"role": "user", "content": self._render(self.rubric, sample, "rubric")})
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    # -- reading the verdict -----------------------------------------------------------------------

    def parse(self, reply: str) -> tuple[float, str | None]:
        """The judge's reply as (score in [0, 1], explanation). Raises ValueError when it holds no
        score, or one off the scale."""
        text = reply[:_MAX_PARSED]
        verdict = _find_json_verdict(text)
        if verdict is not None:
            explanation = next(
                (
                    verdict[k]
                    for k in verdict
                    if str(k).lower() in _EXPLANATION_KEYS and isinstance(verdict[k], str)
                ),
                None,
            )
            raw_score = verdict[_score_key(verdict)]
            if isinstance(raw_score, int | float) and not isinstance(raw_score, bool):
                found: tuple[float, float | None] | None = (float(raw_score), None)
            elif isinstance(raw_score, str):
                found = _read_text_score(raw_score)
            else:
                found = None
            if found is None:
                raise ValueError(f"the judge's JSON score {raw_score!r} is not a number")
        else:
            explanation = reply.strip()[:_RAW_IN_METADATA] or None
            found = _read_text_score(text)
            if found is None:
                raise ValueError("no score found in the judge's reply")
        return self._on_scale(*found), explanation

    def _on_scale(self, number: float, denominator: float | None) -> float:
        shown = f"{number:g}" + (f"/{denominator:g}" if denominator is not None else "")
        if self.scale == SCALE_UNIT:
            if denominator is not None:
                if denominator <= 0:
                    raise ValueError(f"the judge's score {shown} has no meaning")
                number /= denominator
            if 0 <= number <= 1:
                return number
            raise ValueError(f"the judge's score {shown} is outside the 0-1 scale")
        top = self.scale
        if denominator is not None and denominator != top:
            raise ValueError(f"the judge's score {shown} is not on the 1-{top} scale")
        if 1 <= number <= top:
            return (number - 1) / (top - 1)
        raise ValueError(f"the judge's score {shown} is outside the 1-{top} scale")

    # -- scoring -----------------------------------------------------------------------------------

    async def _client(self) -> ChatClient:
        loop = asyncio.get_running_loop()
        held = self._clients.by_loop.get(loop)
        if held is not None:
            return held[0]
        if self.api_key_env and not os.environ.get(self.api_key_env):
            raise ValueError(f"llm_judge api_key_env: environment variable {self.api_key_env!r} is not set")
        client = ChatClient(
            self.base_url,
            api_key_env=self.api_key_env,
            timeout=self.timeout,
            max_retries=self.max_retries,
            concurrency=self.concurrency,
            cache=bool(self.cache),
        )
        by_loop = self._clients.by_loop
        closer = _closed_with_the_loop(client, lambda: by_loop.pop(loop, None))
        by_loop[loop] = (client, closer)
        await anext(closer)  # never suspends: registers the closer with the loop
        return client

    async def aclose(self) -> None:
        """Close the judge's connections on the running loop (they are otherwise closed when the
        loop shuts down, by `asyncio.run`)."""
        held = self._clients.by_loop.pop(asyncio.get_running_loop(), None)
        if held is not None:
            await held[1].aclose()

    async def score(self, sample: Sample) -> Score:
        body = self.request_body(sample)
        client = await self._client()
        try:
            reply = await client.complete(body)
        except TargetFailure as failure:
            raise JudgeError(
                f"judge {self.model!r} call failed: {failure.message}",
                {
                    "model": self.model,
                    "failure_kind": str(failure.kind),
                    "http_status": failure.http_status,
                    "request_id": failure.request_id,
                },
            ) from None
        # BudgetDenied propagates: `evaluate` records it as budget_interrupted.
        raw = _reply_text(reply.content)
        metadata = {"model": reply.model or self.model, "raw": raw[:_RAW_IN_METADATA]}
        try:
            value, explanation = self.parse(raw)
        except ValueError as exc:
            cut = raw if len(raw) <= _RAW_IN_ERROR else raw[: _RAW_IN_ERROR - 3] + "..."
            raise JudgeError(f"{exc}; the judge replied: {cut!r}", metadata) from None
        return Score(value, explanation, metadata=metadata)
