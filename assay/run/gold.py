"""The judge self-check: before spending anything on items, a scorer that declares `gold_check`
(on by default for `llm_judge`, as agent-bench's `verifyJudge`) must score the dataset's first
expected answer, given as the output, as passing (1). A judge that cannot recognise the gold
answer would make every score of the run meaningless."""

from __future__ import annotations

from assay.calls.accounting import Ledger
from assay.errors import InputError
from assay.evaluators import Sample, evaluate
from assay.outcomes import ScorerOutcome, SpendKind
from assay.run.plan import RunPlan


async def gold_check_failures(plan: RunPlan) -> list[str]:
    """One line per scorer whose gold check did not pass (empty when all passed or none asked)."""
    checked = [s for s in plan.spec.scorers if s.gold_check]
    if not checked:
        return []
    gold = next((item for item in plan.items if item.expected is not None), None)
    if gold is None:
        # A check the spec asked for cannot be made: bad input. One on by default (llm_judge) is
        # left out, as agent-bench skips a benchmark's self-check without a gold artifact.
        asked = [s.name for s in checked if "gold_check" in s.model_fields_set]
        if asked:
            raise InputError(
                f"gold_check ({', '.join(asked)}): the dataset has no expected answer to check the "
                "scorers with"
            )
        return []
    sample = Sample(
        output=gold.expected,
        input=gold.input,
        expected=gold.expected,
        annotations=gold.annotations,
        fields=gold.fields,
    )
    failures = []
    for scorer in checked:
        with Ledger(SpendKind.JUDGING, plan.prices, plan.budget):
            record = await evaluate(scorer, sample, spec_dir=str(plan.spec_dir))
        if record.outcome != ScorerOutcome.SCORED or record.score != 1.0:
            why = record.error or f"it scored {record.score}"
            failures.append(
                f"scorer {scorer.name!r} failed its gold check on item {gold.item_id!r} "
                f"(the expected answer as the output): {why}"
            )
    return failures
