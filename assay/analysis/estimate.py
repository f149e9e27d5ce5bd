"""`assay estimate SPEC`: the calls, tokens and cost a run will take, before it spends anything.

Input tokens are counted from the rendered prompts with a plain heuristic (about 4 characters a
token, plus 4 tokens of framing per message — no tokenizer is downloaded, so the figure is
approximate, typically within ±20 % for English); the tools' definitions and a reply's JSON schema
count as the text they are sent as, and images by their provider's documented rule from the
sizes their headers give (`assay.calls.media.image_tokens`: OpenAI's 512-pixel tiles at high
detail, Anthropic's width × height / 750). A document (PDF) has no such rule — OpenAI reads each
page's text and an image of it, Anthropic gives a range a page — so the counted figure leaves it
out and the line says how many it left out (`documents_uncounted`); a stored run's measured
tokens hold it. Output tokens are bounded by `max_tokens` (by
`max_completion_tokens`, a reasoning model's reasoning included; Anthropic's thinking counts
against `max_tokens`).

Where a stored run of the same spec exists (the same target over the same dataset), the tokens it
measured per item stand for this run's: the target's input and output, and each model-graded
scorer's (its rows of the same name and model). Without one the target's output is taken from the
latest stored run of the same target, else from its `max_tokens`; a judge's input is counted from
the prompt it would send (its own template, rendered for each item, the expected answer standing in
for the output), its output at its `max_tokens`: such an expected figure is an upper bound, and
the line says so (`upper_bound`). A call without
`max_tokens` has no maximum: its line's `output_tokens_max` and `cost_usd_max` are null, and so is
the report's `cost_usd_max` (`cost_usd_max_bounded: false`) — never the expected cost passed off as
a maximum. (A model's own output limit would bound it, but nothing here knows it for every model a
spec may name — a local vLLM's least of all — and such a bound is many times any real run's cost.)

A tool loop (`tool_loop: true`) makes one call an item per round of tool calls and one for the
answer: up to `max_tool_rounds` + 1, the line's `calls_max`, whose input counts each call's prompt
and the replies resent before it (not the tools' results, whose size nothing knows before they
run: the line says so, and the report's `cost_usd_max` is null, `cost_usd_max_bounded: false`, as
for a document's uncounted tokens). The calls expected are those a stored run of the same spec
made an item (its items' `operations`), else one an item.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl

from assay.calls.accounting import PriceTable, Usage
from assay.evaluators import Sample
from assay.outcomes import ItemOutcome, RunKind, ScorerOutcome, SpendKind
from assay.run.checks import validate
from assay.run.identity import Identity, identity_of
from assay.spec import EvalSpec
from assay.spec._model_io import DEFAULT_TOOL_ROUNDS
from assay.spec.dataset import Item
from assay.store import Store
from assay.targets import kind_of

_CHARS_PER_TOKEN = 4
_TOKENS_PER_MESSAGE = 4


def count_tokens(text: str) -> int:
    """Approximate tokens of one message: ~4 characters a token, plus its framing."""
    return math.ceil(len(text) / _CHARS_PER_TOKEN) + _TOKENS_PER_MESSAGE


def _stored_run(store: Store, identity: Identity) -> str | None:
    """The latest stored run of this spec's target over this dataset with a completed item."""
    runs = (
        store.runs()
        .filter(
            (pl.col("target_hash") == identity.target)
            & (pl.col("dataset_hash") == identity.dataset)
            & (pl.col("kind") == RunKind.RUN)
        )
        .sort("created_at", descending=True)
        .select("run_id")
        .collect()
    )
    for run_id in runs["run_id"]:
        if _measured(store.run_items(run_id).filter(pl.col("outcome") == ItemOutcome.COMPLETED)):
            return str(run_id)
    return None


def _measured(rows: pl.DataFrame) -> tuple[float, float] | None:
    """Mean input and output tokens of the rows that have both (None when none has)."""
    rows = rows.drop_nulls(["tokens_input", "tokens_output"])
    if not rows.height:
        return None
    tokens_in, tokens_out = rows.select(pl.col("tokens_input", "tokens_output").mean()).row(0)
    return float(tokens_in), float(tokens_out)


def _body_tokens(body: dict[str, Any]) -> int:
    """Approximate tokens of a chat request's messages (and its `system`, Anthropic's)."""
    texts = [body["system"]] if isinstance(body.get("system"), str) else []
    for message in body.get("messages") or []:
        content = message.get("content")
        texts.append(content if isinstance(content, str) else json.dumps(content))
    return sum(count_tokens(text) for text in texts)


def _judge_prompt_tokens(scorer: Any, item: Item) -> int:
    """The tokens of the prompt `scorer` would send for `item`: its template rendered, the
    expected answer standing in for the output not yet made."""
    expected = "" if item.expected is None else item.expected
    sample = Sample(
        output=expected,
        input=item.input,
        expected=item.expected,
        annotations=item.annotations,
        fields=item.fields,
    )
    try:
        return _body_tokens(scorer.request_body(sample))
    except ValueError:  # a field this item lacks: the run fails the scorer there, without a call
        return 0


def _observed_output_tokens(store: Store, target_hash: str) -> float | None:
    """Mean output tokens per completed item in the latest stored run of the same target."""
    runs = (
        store.runs()
        .filter((pl.col("target_hash") == target_hash) & (pl.col("kind") == RunKind.RUN))
        .sort("created_at", descending=True)
        .select("run_id")
        .collect()
    )
    for run_id in runs["run_id"]:
        done = (
            store.run_items(run_id)
            .filter(pl.col("outcome") == ItemOutcome.COMPLETED)["tokens_output"]
            .drop_nulls()
        )
        if len(done):
            return float(done.mean())
    return None


def _line(
    model: str,
    calls: int,
    input_tokens: int,
    output_low: float,
    output_high: float | None,
    prices: PriceTable,
    *,
    batch: bool = False,
    upper_bound: bool = False,
    input_high: int | None = None,
) -> dict:
    """One model's calls: tokens, and the expected and the maximum cost (at batch prices for
    calls made through a batch API, with what they would cost online beside them); no maximum
    when `output_high` is None (unbounded). `input_high`: the input of the most calls, when more
    calls than expected may be made (a tool loop)."""
    low = Usage(input_tokens=input_tokens, output_tokens=round(output_low))
    expected = prices.cost(model, low, batch=batch)
    upper = None
    if output_high is not None:
        most_in = input_tokens if input_high is None else input_high
        upper = prices.cost(model, Usage(input_tokens=most_in, output_tokens=round(output_high)), batch=batch)
    online = {"cost_usd_expected_online": prices.cost(model, low)} if batch else {}
    return {
        "model": model,
        "calls": calls,
        "input_tokens": input_tokens,
        "output_tokens_expected": round(output_low),
        "output_tokens_max": None if output_high is None else round(output_high),
        "cost_usd_expected": expected,
        "cost_usd_max": upper,
        **online,
        "priced": model in prices.prices,
        "bounded": output_high is not None,
        # The expected figure is the maximum: nothing measured the output, its cap stands for it.
        "upper_bound": upper_bound,
    }


def _with_attempts(line: dict[str, Any], attempts: int) -> dict[str, Any]:
    """With `attempts: K` an item runs once if it passes, up to K times if not: the expected
    figures assume one attempt, the maximum K."""
    if attempts > 1:
        line["calls_max"] = line.get("calls_max", line["calls"]) * attempts
        for key in ("output_tokens_max", "cost_usd_max"):
            line[key] = None if line[key] is None else line[key] * attempts
        line["note"] += f"; up to {attempts} attempts an item (maximum × {attempts})"
    return line


def _session_note(spec: EvalSpec) -> str:
    if spec.policy is None:
        return ""
    return "; the policy's further prompts are not counted (each is one more call)"


def _reasoning_note(spec: EvalSpec) -> str:
    """What the bound holds of a reasoning model's reasoning, which is billed as output."""
    target = spec.target
    if getattr(target, "max_completion_tokens", None) is not None:
        return " (its reasoning tokens included)"
    thinking = getattr(target, "thinking", None)
    if thinking is not None:
        return f" (thinking's budget_tokens {thinking.budget_tokens} included)"
    return ""


def _loop_calls(target: Any) -> int | None:
    """The most calls one item of a tool loop makes (its rounds of tool calls, then the answer),
    or None: not a tool loop, one call an item."""
    if not getattr(target, "tool_loop", None):
        return None
    return (target.max_tool_rounds or DEFAULT_TOOL_ROUNDS) + 1


def _calls_per_item(completed: pl.DataFrame) -> float | None:
    """The mean model calls a completed item made (its `operations`), or None when none says."""
    made = completed["operations"].drop_nulls()
    return float(made.mean()) if len(made) else None  # type: ignore[arg-type]


def _generation(
    cell: str | None,
    spec: EvalSpec,
    items: list[Item],
    store: Store,
    prices: PriceTable,
    spec_dir: Path,
    identity: Identity,
    stored: str | None,
) -> dict[str, Any]:
    """The target's line: its measured calls (its kind says which), or the calls it makes
    unmeasured."""
    target = spec.target
    calls = item_trials = len(items) * spec.trials
    metered = kind_of(target).metered(target, spec_dir)
    if metered is None:
        return {
            "cell": cell,
            "kind": SpendKind.GENERATION.value,
            "model": None,
            "calls": calls,
            "note": f"{target.kind} target: its spend is not measured by Assay (uninstrumented)",
        }
    ceiling = metered.max_tokens
    most = _loop_calls(target)
    completed = store.run_items(stored).filter(pl.col("outcome") == ItemOutcome.COMPLETED) if stored else None
    measured = _measured(completed) if completed is not None else None
    made = _calls_per_item(completed) if most and completed is not None and measured else None
    if made is not None:
        calls = round(made * item_trials)
    calls_max = item_trials * (most or 1)
    max_out = (ceiling * calls_max) if ceiling else None
    upper = False

    def counted() -> int:
        return spec.trials * sum(
            sum(count_tokens(text) for text in metered.texts(item)) + metered.extra_tokens(item)
            for item in items
        )

    if measured is not None:
        # Measured per item: a tool loop's every round is in its item's tokens.
        input_tokens, expected_out = round(measured[0] * item_trials), measured[1] * item_trials
        note = f"tokens measured in stored run {stored} of this spec"
        documents = 0
    else:
        input_tokens = counted()
        documents = spec.trials * sum(metered.documents(item) for item in items)
        observed = _observed_output_tokens(store, identity.target)
        expected_out = (observed if observed is not None else (ceiling or 0)) * calls
        if observed is not None:
            note = "output tokens observed in a stored run of this target"
        elif ceiling:
            note = f"output tokens bounded by {metered.bound_by}{_reasoning_note(spec)}"
            # One call an item at its cap is the most only when no tool loop may make more.
            upper = most is None
            note += ": an upper bound" if upper else ""
        else:
            note = "no max_tokens and no stored run: output tokens not estimated"
    input_high = None
    if most:
        # Call k of an item resends the k replies before it (each at most the cap); never below
        # what a stored run measured, whose input held the tools' results too.
        resent = (ceiling or 0) * item_trials * most * (most - 1) // 2
        input_high = max(counted() * most + resent, input_tokens)
        note += (
            f"; tool loop: up to {most} calls an item (max_tool_rounds {most - 1} + the answer), "
            "the maximum's input without the tools' results"
        )
        if made is not None:
            note += f"; {made:.3g} calls an item in stored run {stored}"
    line = _line(
        metered.model,
        calls,
        input_tokens,
        expected_out,
        max_out,
        prices,
        batch=metered.batch,
        upper_bound=upper,
        input_high=input_high,
    )
    if most:
        line["calls_max"] = calls_max
    if documents:
        line["documents_uncounted"] = documents
        note += f"; {documents} documents (PDF) not counted in input tokens (no documented rule)"
    if most or documents:
        # Input nothing here can count (the tools' results, the documents): the line's maximum is
        # what it counted, and the spec's total has none, as for a call without max_tokens.
        line["bounded"] = False
    if metered.batch:
        online = line["cost_usd_expected_online"]
        note += "; batch prices" + (
            f" (online ${online:.4f})" if online is not None else ", none for this model"
        )
    line.update(cell=cell, kind=SpendKind.GENERATION.value, note=note + _session_note(spec))
    return _with_attempts(line, spec.attempts)


def _judging(
    scorer: Any, items: list[Item], trials: int, store: Store, stored: str | None, prices: PriceTable
) -> dict[str, Any]:
    """A model-graded scorer's line: the tokens it used in the stored run of this spec, else its
    prompts counted from its template and its output at its `max_tokens` (an upper bound)."""
    calls = len(items) * trials
    judge_max = getattr(scorer, "max_tokens", None)
    max_out = judge_max * calls if judge_max else None
    measured = None
    if stored is not None:
        scored = store.run_scores(stored).filter(
            (pl.col("scorer") == scorer.name)
            & (pl.col("model") == scorer.model)
            & (pl.col("outcome") == ScorerOutcome.SCORED)
        )
        measured = _measured(scored)
    if measured is not None:
        judge = _line(scorer.model, calls, round(measured[0] * calls), measured[1] * calls, max_out, prices)
        judge["note"] = f"tokens measured in stored run {stored} of this spec"
        return judge
    judge_in = trials * sum(_judge_prompt_tokens(scorer, item) for item in items)
    judge = _line(scorer.model, calls, judge_in, max_out or 0, max_out, prices, upper_bound=bool(judge_max))
    judge["note"] = (
        "prompts from the judge's template; output bounded by max_tokens: an upper bound (no stored run of this spec)"
        if judge_max
        else "prompts from the judge's template; no max_tokens: output tokens not estimated"
    )
    return judge


def estimate(spec_path: str | Path, *, store: Store) -> dict[str, Any]:
    """Estimate every cell of a spec: generation calls and model-graded scorers' judging calls.

    Args:
        spec_path: the spec.
        store: where earlier runs of the same target are looked up for observed output lengths.
    """
    spec, items = validate(Path(spec_path).resolve())
    spec_dir = Path(spec_path).resolve().parent
    lines = []
    for cell, cell_spec in spec.cells():
        prices = PriceTable.shipped(cell_spec.prices)
        # With the spec's folder, as a run computes it: a Python tool's identity is its schema.
        identity = identity_of(cell_spec, items, spec_dir)
        stored = _stored_run(store, identity)
        lines.append(_generation(cell, cell_spec, items, store, prices, spec_dir, identity, stored))
        for scorer in cell_spec.scorers:
            if type(scorer).deterministic or not hasattr(scorer, "model"):
                continue
            judge = _judging(scorer, items, spec.trials, store, stored, prices)
            judge.update(cell=cell, kind=SpendKind.JUDGING.value, scorer=scorer.name)
            lines.append(_with_attempts(judge, cell_spec.attempts))
    known = [line for line in lines if line.get("cost_usd_expected") is not None]
    # A true maximum only when every measured call's output is capped by a max_tokens.
    bounded = all(line.get("bounded", True) for line in lines)
    return {
        "spec": str(spec_path),
        "items": len(items),
        "trials": spec.trials,
        "lines": lines,
        "cost_usd_expected": sum(line["cost_usd_expected"] for line in known),
        "cost_usd_max": sum(line["cost_usd_max"] for line in known) if bounded else None,
        "cost_usd_max_bounded": bounded,
        # Some line's expected cost is its maximum: no stored run of the spec measured its output.
        "cost_usd_expected_upper_bound": any(line.get("upper_bound") for line in known),
        "priced_calls": sum(line["calls"] for line in known),
        "unpriced_models": sorted(
            {line["model"] for line in lines if line.get("model") and not line.get("priced")}
        ),
        "budget": spec.budget,
    }
