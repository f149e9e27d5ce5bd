"""Validating a spec before a run: the spec and dataset load, API keys are set, every reference
(target, scorers, policy) resolves, and every item's prompts render.

`validate` raises an `InputError` naming the field; nothing is written. `assay.run.plan` calls it
before it records a run; `assay validate` and the estimate call it alone.
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from assay.calls.accounting import PriceTable
from assay.calls.keys import key_problems
from assay.errors import DatasetError, SpecError
from assay.evaluators._imports import resolve_callable
from assay.spec import EvalSpec, load_spec
from assay.spec.dataset import Item, load_dataset
from assay.targets import kind_of


def _check_items(spec: EvalSpec, items: list[Item], spec_path: Path) -> None:
    """Every item must be askable (its kind says: prompts render) and scorable (a scorer's
    templates fill), so a template naming a missing field fails before anything runs: a
    placeholder no item can fill is the spec's error, one some items cannot the dataset's."""
    names = {name for item in items for name in (*item.fields, *item.annotations)}
    unknown = [
        f"scorers.{n}.{problem}"
        for n, scorer in enumerate(spec.scorers)
        for problem in scorer.template_problems(names)
    ]
    if unknown:
        raise SpecError(unknown, source=str(spec_path))
    problems = []
    for cell, cell_spec in spec.cells():
        where = "target" if cell is None else f"targets.{cell}"
        problems += kind_of(cell_spec.target).item_problems(cell_spec.target, items, where)
    for n, scorer in enumerate(spec.scorers):
        problems += scorer.item_problems(items, spec_path.parent, f"scorers.{n}")
    if problems:
        raise DatasetError(problems)


def validate(spec_path: Path) -> tuple[EvalSpec, list[Item]]:
    """Load the spec and dataset, check every reference resolves and every prompt renders;
    raises `InputError`s. The spec returned names the data read: a Hugging Face dataset's
    `revision` is the commit its branch or tag named (`load_dataset`)."""
    spec = load_spec(spec_path)
    _check_environment(spec, spec_path)
    _check_references(spec, spec_path)
    _check_policy(spec, spec_path)
    dataset, items = load_dataset(spec.dataset, spec_path.parent)
    spec = spec.model_copy(update={"dataset": dataset})
    _check_items(spec, items, spec_path)
    return spec, items


def _check_environment(spec: EvalSpec, spec_path: Path) -> None:
    """API keys the spec names must be set; a budget must be able to see every model's spend."""
    problems = []
    models = []
    for _, cell_spec in spec.cells():
        parts = [("target", cell_spec.target)] + [
            (f"scorers.{n}", s) for n, s in enumerate(cell_spec.scorers)
        ]
        for where, part in parts:
            problems += key_problems(part, where)
        # Models whose spend Assay measures: the target's (if its kind is metered), judges'.
        metered = kind_of(cell_spec.target).metered(cell_spec.target, spec_path.parent)
        judged = [
            (f"scorers.{n}", s.model)
            for n, s in enumerate(cell_spec.scorers)
            if getattr(s, "model", None) and not type(s).deterministic
        ]
        for where, model in ([("target", metered.model)] if metered else []) + judged:
            models.append((where, model, PriceTable.shipped(cell_spec.prices)))
    if spec.budget is not None:
        problems += [
            f"budget: {where} model {model!r} has no price, so its spend cannot count against the budget; "
            f"add it under prices:"
            for where, model, prices in models
            if model not in prices.prices
        ]
    if problems:
        raise SpecError(sorted(set(problems)), source=str(spec_path))


def _check_references(spec: EvalSpec, spec_path: Path) -> None:
    """What the spec names must exist: the target's kind checks its own (a python target's
    function imports), and user_code scorers' and `applies` functions must import from the
    spec's folder (the policy: `_check_policy`)."""
    spec_dir = str(spec_path.parent)
    problems = []
    for cell, cell_spec in spec.cells():
        where = "target" if cell is None else f"targets.{cell}"
        problems += kind_of(cell_spec.target).problems(cell_spec.target, spec_path.parent, where)
    problems += scorer_problems(spec.scorers, spec_dir)
    if problems:
        raise SpecError(problems, source=str(spec_path))


def scorer_problems(scorers: list[Any], spec_dir: str) -> list[str]:
    """Why the scorers' `module:function` references cannot be used, one line each naming the
    field (`scorers.<n>.function: cannot import ...`); empty when all resolve."""
    return [
        f"scorers.{n}.{problem}"
        for n, scorer in enumerate(scorers)
        for problem in scorer.unresolved(spec_dir)
    ]


def _check_policy(spec: EvalSpec, spec_path: Path) -> None:
    """The policy must import from the spec's folder and be an async function of the session
    (every kind of target holds sessions: `assay.targets.SessionTarget`)."""
    if spec.policy is None:
        return
    try:
        policy = resolve_callable(spec.policy, spec_dir=str(spec_path.parent))
    except (ValueError, TypeError) as exc:
        raise SpecError(f"policy: {exc}", source=str(spec_path)) from None
    if not inspect.iscoroutinefunction(policy):
        raise SpecError(
            f"policy: {spec.policy!r} must be an async function, e.g. `async def policy(session): ...`",
            source=str(spec_path),
        )
