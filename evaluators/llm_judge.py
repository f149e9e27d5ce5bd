"""The `llm_judge` scorer: a model grades each output against a rubric.

The rubric is a template over the item (`{input}`, `{output}`, `{expected}`, the annotations'
keys, the dataset row's fields, and `{scale}`, which describes the scale in words). A rubric that
names no field at all ("Is the answer correct?") is a criterion: it is wrapped in the standard
grading template, which shows the input, the expected answer and the output before it (as
inspect_ai's model-graded QA does). A rubric that names fields but never `{output}` could not show
the judge what it grades: that is a spec error. The judge's reply is read robustly
(`evaluators/_judge_reply.py`): a JSON object `{"score": ..., "explanation": ...}` first (bare, in
a ```json fence, or embedded in text), else a labelled number (`Score: 7/10`, `score = 0.8`,
`Rating: [[4]]`), else `8 out of 10`, else a reply that is only a number. A reply with no score,
or one off the scale, fails the scorer; the raw reply is kept in the score's metadata.

The judge speaks OpenAI's chat completions (`provider: openai`, the default: any compatible
endpoint) — or, with `api: responses`, OpenAI's Responses API (`assay.calls.responses`: the system
prompt as `instructions`, the rubric as `input`, `max_tokens` as `max_output_tokens`) — or
Anthropic's Messages API (`provider: anthropic`: system prompt at the top level, `max_tokens`
required, a pinned model checked before the run starts).

Calls go through `assay.calls.chat.ChatClient`, so each is measured into the ledger the executor opens
around the scorer (judging spend, priced with the run's price table) and admitted by the run's
budget: a refused call raises `BudgetDenied`, which `evaluate` records as `budget_interrupted`.
Every attempt passes the adaptive rate controller of the judge's (endpoint, model)
(`assay.calls.aimd`) — the target's own when both call one model on one account.

With `batch:` the judge's calls go through the provider's batch API instead (`assay.calls.batch`),
at batch prices, each held against the budget at its maximum cost until its result arrives
(`assay.calls.batch_mode`). Its batches are recorded in the run's `batches/` (`purpose: judging`,
`scorer: <name>`) the moment the provider accepts them, so `assay resume` re-attaches to them. A
request's custom id is a hash of the scorer, the item, the trial and the request itself: a resumed
run whose target answers the same re-attaches, one whose target answers differently has a new
answer to grade and asks afresh. The gold check (one call, before the run) is made online.
"""

from __future__ import annotations

import asyncio
import json
import re
import statistics
import string
from typing import Any, ClassVar, Literal

from pydantic import Field, PrivateAttr, ValidationInfo, field_validator, model_validator

from assay._templates import FieldValue, template_problem
from assay.calls.apis import APIS, OTHER_APIS
from assay.calls.batch import custom_id
from assay.calls.batch_mode import BatchOption, batched_call
from assay.calls.endpoint import ENDPOINT_SETTINGS, ModelEndpoint
from assay.calls.pinning import model_pin_problem
from assay.calls.response_cache import check_cache
from assay.calls.wire import ChatAPI
from assay.errors import JudgeError, TargetFailure
from assay.evaluators._base import Sample, Score, Scorer, run_context
from assay.evaluators._judge_clients import LiveClients
from assay.evaluators._judge_reply import RAW_KEPT, read_verdict, reply_text

SCALE_UNIT = "0-1"
_RAW_IN_ERROR = 500

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

# A rubric naming no field is the criterion in this template (inserted as text, not formatted).
GRADING_TEMPLATE = """\
You are an impartial grader. Grade the answer an AI model gave to the question below against the \
criterion.

[Question]
{input}

[Reference answer]
{expected}

[Model's answer]
{output}

[Criterion]
<criterion>

Score the model's answer on {scale}.
Reply with a JSON object and nothing else: {{"score": <number>, "explanation": "<one or two sentences>"}}"""


def _field_names(template: str) -> list[str]:
    """The fields `template` names, e.g. `["input", "output[answer]"]`. Raises ValueError when it
    does not parse."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


class LlmJudge(ModelEndpoint, Scorer):
    """A model grades the output against a rubric; its score is mapped to [0, 1]. This is the
    judge's spec; the clients it calls its model through are live, opened per event loop from it
    (`evaluators/_judge_clients.py`). Its endpoint fields (`base_url`, the key, `timeout`,
    `max_retries`, `response_headers`, `rate_limits`) are `ModelEndpoint`'s, as a chat target's.

    The judge's reply is read, in this order (`evaluators/_judge_reply.py`): a JSON object with a
    `score` (or `rating`, `grade`) and an optional `explanation` — `{"score": 4, "explanation":
    "..."}`, alone, in a ```json fence or inside prose; else the last labelled number (`Score:
    7/10`, `score = 0.8`, `Rating: [[4]]`); else `8 out of 10`; else a reply that is only a
    number. A reply with none of these fails the scorer (`no score found in the judge's reply`),
    never scores 0. A mock judge answering `{"score": 1}` passes every item.

    Args:
        base_url: the endpoint, e.g. `https://api.openai.com/v1` or `https://api.anthropic.com/v1`.
        provider: `openai` (chat completions, any compatible endpoint) or `anthropic` (the
            Messages API, key sent as `x-api-key`).
        api: with `provider: openai`, `chat_completions` (the default) or `responses`: OpenAI's
            Responses API (docs/responses-api.md); with `batch`, a batch of `/v1/responses`
            requests. Part of the run's identity only when it is not the default.
        model: the judge's exact model version (a moving alias makes scores unrepeatable; with
            `provider: anthropic` one is refused before the run starts).
        rubric: the judge's prompt, a template over `{input}`, `{output}`, `{expected}`, `{scale}`
            (the scale in words), the item's annotations and the dataset row's fields (those four
            names win over an annotation of the same name). The default asks for correctness,
            completeness and clarity, and a JSON reply with a score and an explanation. A rubric
            naming no field (`"Is the answer correct?"`) is the criterion of a standard grading
            template that shows the judge the input, the expected answer and the output; one
            naming fields but not `{output}` is refused.
        system: an optional system prompt (a template like the rubric).
        scale: `"0-1"` (scores in [0, 1], taken as is), or N (or `"1-N"`), N >= 2: whole scores
            1..N, mapped to [0, 1] by (s - 1) / (N - 1). On the 0-1 scale "7/10" and "70%" read
            as fractions; on a 1-N scale a stated denominator must be N.
        temperature: sampling temperature (default 0); null leaves it to the provider.
        max_tokens: the judge's reply limit (default 512); null leaves it to the provider (not
            with `provider: anthropic`, whose API requires one).
        rate_limits: `{rpm, tpm}`, as for a target: paces the judge's calls to its endpoint and
            model (the target's own window when both call one model there).
        cache: `true` answers a repeated judge request from the store's response cache (needs
            `temperature: 0`); `always` caches whatever the temperature.
        concurrency: the connection pool's width (judge calls in flight are bounded by the run's
            concurrency and `scorer_concurrency`).
        gold_check: the judge self-check (`Scorer.gold_check`), on by default; `false` turns it
            off. On by default it is skipped when the dataset has no expected answer.
        batch: `true` or `{max_requests, max_wait_s, poll_s, max_batches}`: send the judge's calls
            through the provider's batch API, at batch prices (docs/batch.md); not
            with `cache`, and `max_tokens` must bound what a batch may cost.
        judge_samples: K >= 2 asks the judge K times per item (K calls, each through the same
            retries, rate controller, budget and capture; sampled, so a `temperature` above 0
            makes sense): the item's score is the mean of the K — a binary judge's pass rate, not
            a majority vote, so that it stays an unbiased estimate of the judge's own mean — and
            the K scores' sample variance is stored as the row's `judge_variance` (the K scores
            in its metadata). Not with `cache` (a cache would answer the K requests with one
            reply); in batch mode each sample has its own custom id. Unset (the default) it
            stays out of the run's identity.
    """

    version: ClassVar[str] = "1"
    deterministic: ClassVar[bool] = False
    operational: ClassVar[frozenset[str]] = ENDPOINT_SETTINGS | {
        "concurrency",
        "cache",
        "gold_check",
        "batch",
    }

    kind: Literal["llm_judge"] = "llm_judge"
    provider: Literal["openai", "anthropic"] = "openai"
    api: Literal["chat_completions", "responses"] = "chat_completions"
    model: str = Field(min_length=1)
    rubric: str = Field(default=DEFAULT_RUBRIC, min_length=1)
    system: str | None = None
    scale: Literal["0-1"] | int = SCALE_UNIT
    temperature: float | None = Field(default=0.0, ge=0, le=2, strict=True)
    max_tokens: int | None = Field(default=512, ge=1, strict=True)
    cache: bool | Literal["always"] = False
    concurrency: int = Field(default=16, ge=1, le=10_000, strict=True)
    # On by default, as agent-bench's `verifyJudge`: a judge that cannot recognise the gold answer
    # makes every score meaningless, and finding out costs one call.
    gold_check: bool = True
    batch: BatchOption = None
    judge_samples: int | None = Field(default=None, ge=2, le=100, strict=True)

    _clients: LiveClients = PrivateAttr(default_factory=LiveClients)

    @model_validator(mode="after")
    def _cache_needs_greedy_sampling(self) -> LlmJudge:
        check_cache(self.cache, self.temperature)
        if self._api.needs_max_tokens and self.max_tokens is None:
            raise ValueError(f"max_tokens: provider {self.provider}'s API requires one")
        if self.batch is not None and self.cache:
            raise ValueError("batch cannot be combined with cache")
        if self.judge_samples is not None and self.cache:
            raise ValueError(
                "judge_samples cannot be combined with cache: the cache would answer the K requests "
                "with one reply, and measure no variance"
            )
        if (other := OTHER_APIS.get(self.api)) is not None and other.name != self.provider:
            raise ValueError(
                f"api: {self.api} is provider {other.name}'s API, not provider {self.provider}'s"
            )
        if self.batch is not None and self.max_tokens is None:
            raise ValueError(
                "batch needs max_tokens: it bounds what a batch may cost until its results arrive"
            )
        return self

    def in_flight(self, concurrency: int) -> int:
        """In batch mode `max_batches` batches' worth of outputs wait at once, whatever `concurrency` is."""
        return concurrency if self.batch is None else max(concurrency, self.batch.in_flight)

    def unresolved(self, spec_dir: str | None = None) -> list[str]:
        """As every scorer's, and an Anthropic judge's model must be pinned (`model_pin_problem`)."""
        problems = super().unresolved(spec_dir)
        if self._api.pins_models and (problem := model_pin_problem(self.model)) is not None:
            problems.append(f"model: {problem}")
        return problems

    @field_validator("rubric", "system")
    @classmethod
    def _template_parses(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is not None and (problem := template_problem(value, example="field, e.g. {output}")):
            cut = value if len(value) <= 80 else value[:77] + "..."
            raise ValueError(f"bad {info.field_name} template {cut!r}: {problem}")
        return value

    @model_validator(mode="after")
    def _rubric_shows_the_output(self) -> LlmJudge:
        named = {re.split(r"[.\[]", name, maxsplit=1)[0] for name in _field_names(self.rubric)}
        if self.system is not None:
            named |= {re.split(r"[.\[]", name, maxsplit=1)[0] for name in _field_names(self.system)}
        if named and "output" not in named:
            shown = ", ".join(f"{{{name}}}" for name in sorted(named))
            raise ValueError(
                f"rubric names {shown} but never {{output}}, so the judge would not see what it grades: "
                "add {output}, or name no field at all to use the standard grading template"
            )
        return self

    @property
    def prompt_template(self) -> str:
        """The judge's prompt template: the rubric, or, when it names no field, the standard
        grading template with the rubric as its criterion."""
        if _field_names(self.rubric):
            return self.rubric
        return GRADING_TEMPLATE.replace("<criterion>", self.rubric)

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
        namespace = {key: FieldValue(value) for key, value in values.items()}
        namespace["scale"] = FieldValue(self._scale_words())
        try:
            return template.format_map(namespace)
        except KeyError as exc:
            known = ", ".join(sorted(namespace))
            raise ValueError(
                f"{what} names {{{exc.args[0]}}}, which this item lacks; it has: {known}"
            ) from None
        except (IndexError, TypeError, ValueError) as exc:
            raise ValueError(f"{what} cannot be filled for this item: {type(exc).__name__} {exc}") from None

    def identity(self) -> dict[str, Any]:
        """As every scorer's; `api` only when it is not the default (chat completions) and
        `judge_samples` only when set, so a judge that names neither keeps the identity it had
        before they existed."""
        identity = super().identity()
        if identity.get("api") == "chat_completions":
            del identity["api"]
        if identity.get("judge_samples") is None:
            identity.pop("judge_samples", None)
        return identity

    @property
    def _api(self) -> ChatAPI:
        return OTHER_APIS.get(self.api) or APIS[self.provider]

    def request_body(self, sample: Sample) -> dict[str, Any]:
        return self._api.prompt_body(
            model=self.model,
            prompt=self._render(self.prompt_template, sample, "rubric"),
            system=None if self.system is None else self._render(self.system, sample, "system"),
            temperature=self.temperature,
            max_tokens=self.max_tokens,
        )

    # -- reading the verdict -----------------------------------------------------------------------

    def parse(self, reply: str) -> tuple[float, str | None]:
        """The judge's reply as (score in [0, 1], explanation). Raises ValueError when it holds no
        score, or one off the scale."""
        found, explanation = read_verdict(reply)
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

    async def aclose(self) -> None:
        """Close the judge's connections on the running loop (they are otherwise closed when the
        loop shuts down, by `asyncio.run`)."""
        await self._clients.aclose()

    async def _ask(self, sample: Sample, draw: int | None = None) -> tuple[Any, str | None]:
        """The judge's reply to the sample (its content, and the model that answered): through a
        batch in batch mode — not the gold check's, which is one call before the run — else online.
        `draw` is which of `judge_samples` asks this is (its own batch request)."""
        body = self.request_body(sample)
        clients = await self._clients.opened(self, self._api)
        if self.batch is not None and sample.item_id is not None:
            context = run_context.get()
            batcher = clients.batcher(context.store, context.run_id)
            digest = json.dumps(body, sort_keys=True, ensure_ascii=False)
            if draw is not None:
                digest += f"#{draw}"
            cid = custom_id(self.name, sample.item_id, sample.trial, digest)
            assert self.max_tokens is not None  # checked with the spec
            message, _ = await batched_call(
                batcher, cid, body, api=self._api, model=self.model, max_tokens=self.max_tokens
            )
            return self._api.content(message), message.get("model")
        reply = await clients.chat.complete(body)
        return reply.content, reply.model

    async def score(self, sample: Sample) -> Score:
        if self.judge_samples is None or sample.item_id is None:  # the gold check asks once
            return await self._score_once(sample)
        asks = [asyncio.ensure_future(self._score_once(sample, k)) for k in range(self.judge_samples)]
        try:
            draws = await asyncio.gather(*asks)
        except BaseException:
            # One ask failed (or the item was cancelled): the item fails, and the other asks stop
            # rather than run on, unaccounted, after the scorer's ledger has closed.
            for ask in asks:
                ask.cancel()
            await asyncio.gather(*asks, return_exceptions=True)
            raise
        values = [draw.value for draw in draws]
        metadata = {**(draws[0].metadata or {}), "samples": values}
        return Score(
            statistics.fmean(values),
            draws[0].explanation,
            metadata=metadata,
            judge_variance=statistics.variance(values),
            judge_samples=self.judge_samples,
        )

    async def _score_once(self, sample: Sample, draw: int | None = None) -> Score:
        try:
            content, model = await self._ask(sample, draw)
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
        raw = reply_text(content)
        metadata = {"model": model or self.model, "raw": raw[:RAW_KEPT]}
        try:
            value, explanation = self.parse(raw)
        except ValueError as exc:
            cut = raw if len(raw) <= _RAW_IN_ERROR else raw[: _RAW_IN_ERROR - 3] + "..."
            raise JudgeError(f"{exc}; the judge replied: {cut!r}", metadata) from None
        return Score(value, explanation, metadata=metadata)
