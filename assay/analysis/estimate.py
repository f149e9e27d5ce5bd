"""`assay estimate SPEC`: the calls, tokens and cost a run will take, before it spends anything.

Input tokens are counted from the rendered prompts with a plain heuristic (about 4 characters a
token, plus 4 tokens of framing per message — no tokenizer is downloaded, so the figure is
approximate, typically within ±20 % for English); the tools' definitions and a reply's JSON schema
count as the text they are sent as, and images by their provider's documented rule from the
sizes their headers give (`assay.calls.media.image_tokens`: OpenAI's 512-pixel tiles at high
detail, Anthropic's width × height / 750). Output tokens are bounded by `max_tokens` (by
`max_completion_tokens`, a reasoning model's reasoning included; Anthropic's thinking counts
against `max_tokens`),
and estimated from the latest stored run of the same target when there is one. A call without
`max_tokens` has no maximum: its line's `output_tokens_max` and `cost_usd_max` are null, and so is
the report's `cost_usd_max` (`cost_usd_max_bounded: false`) — never the expected cost passed off as
a maximum. (A model's own output limit would bound it, but nothing here knows it for every model a
spec may name — a local vLLM's least of all — and such a bound is many times any real run's cost.)
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import polars as pl

from assay.calls.accounting import PriceTable, Usage
from assay.outcomes import ItemOutcome, RunKind, SpendKind
from assay.run.checks import validate
from assay.run.identity import identity_of
from assay.spec import EvalSpec
from assay.spec.dataset import Item
from assay.store import Store
from assay.targets import kind_of

_CHARS_PER_TOKEN = 4
_TOKENS_PER_MESSAGE = 4


def count_tokens(text: str) -> int:
    """Approximate tokens of one message: ~4 characters a token, plus its framing."""
    return math.ceil(len(text) / _CHARS_PER_TOKEN) + _TOKENS_PER_MESSAGE


def _observed_output_tokens(store: Store, spec: EvalSpec, items: list[Item]) -> float | None:
    """Mean output tokens per completed item in the latest stored run of the same target."""
    target_hash = identity_of(spec, items).target
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
) -> dict:
    """One model's calls: tokens, and the expected and the maximum cost (at batch prices for
    calls made through a batch API, with what they would cost online beside them); no maximum
    when `output_high` is None (unbounded)."""
    low = Usage(input_tokens=input_tokens, output_tokens=round(output_low))
    expected = prices.cost(model, low, batch=batch)
    upper = None
    if output_high is not None:
        upper = prices.cost(
            model, Usage(input_tokens=input_tokens, output_tokens=round(output_high)), batch=batch
        )
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
    }


def _with_attempts(line: dict[str, Any], attempts: int) -> dict[str, Any]:
    """With `attempts: K` an item runs once if it passes, up to K times if not: the expected
    figures assume one attempt, the maximum K."""
    if attempts > 1:
        line["calls_max"] = line["calls"] * attempts
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


def _generation(
    cell: str | None, spec: EvalSpec, items: list[Item], store: Store, prices: PriceTable, spec_dir: Path
) -> dict[str, Any]:
    """The target's line: its measured calls (its kind says which), or the calls it makes
    unmeasured."""
    target = spec.target
    calls = len(items) * spec.trials
    metered = kind_of(target).metered(target, spec_dir)
    if metered is None:
        return {
            "cell": cell,
            "kind": SpendKind.GENERATION.value,
            "model": None,
            "calls": calls,
            "note": f"{target.kind} target: its spend is not measured by Assay (uninstrumented)",
        }
    per_item = sum(
        sum(count_tokens(text) for text in metered.texts(item)) + metered.extra_tokens(item) for item in items
    )
    observed = _observed_output_tokens(store, spec, items)
    ceiling = metered.max_tokens
    expected_out = (observed if observed is not None else (ceiling or 0)) * calls
    max_out = (ceiling * calls) if ceiling else None
    if observed is not None:
        note = "output tokens observed in a stored run of this target"
    elif ceiling:
        note = f"output tokens bounded by {metered.bound_by}" + _reasoning_note(spec)
    else:
        note = "no max_tokens and no stored run: output tokens not estimated"
    line = _line(
        metered.model, calls, per_item * spec.trials, expected_out, max_out, prices, batch=metered.batch
    )
    if metered.batch:
        online = line["cost_usd_expected_online"]
        note += "; batch prices" + (
            f" (online ${online:.4f})" if online is not None else ", none for this model"
        )
    line.update(cell=cell, kind=SpendKind.GENERATION.value, note=note + _session_note(spec))
    return _with_attempts(line, spec.attempts)


def estimate(spec_path: str | Path, *, store: Store) -> dict[str, Any]:
    """Estimate every cell of a spec: generation calls and model-graded scorers' judging calls.

    Args:
        spec_path: the spec.
        store: where earlier runs of the same target are looked up for observed output lengths.
    """
    spec, items = validate(Path(spec_path).resolve())
    lines = []
    for cell, cell_spec in spec.cells():
        prices = PriceTable.shipped(cell_spec.prices)
        calls = len(items) * spec.trials
        lines.append(_generation(cell, cell_spec, items, store, prices, Path(spec_path).resolve().parent))
        for scorer in cell_spec.scorers:
            if type(scorer).deterministic or not hasattr(scorer, "model"):
                continue
            rubric = str(getattr(scorer, "rubric", ""))
            judge_in = (
                sum(count_tokens(rubric) + count_tokens(str(item.input)) for item in items) * spec.trials
            )
            judge_max = getattr(scorer, "max_tokens", None)
            judge_out = (judge_max or 0) * calls
            judge = _line(scorer.model, calls, judge_in, judge_out, judge_out if judge_max else None, prices)
            note = (
                "output bounded by max_tokens" if judge_max else "no max_tokens: output tokens not estimated"
            )
            judge.update(cell=cell, kind=SpendKind.JUDGING.value, scorer=scorer.name, note=note)
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
        "priced_calls": sum(line["calls"] for line in known),
        "unpriced_models": sorted(
            {line["model"] for line in lines if line.get("model") and not line.get("priced")}
        ),
        "budget": spec.budget,
    }
