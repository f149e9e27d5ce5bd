"""The eval spec's top level and its dataset section."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import Field, field_validator, model_validator

from assay.calls.accounting import Price, parse_budget
from assay.calls.capture import CaptureSettings
from assay.errors import SpecError
from assay.evaluators import ScorerSpec
from assay.outcomes import GAUGE_PREFIX
from assay.spec._base import StrictModel
from assay.spec.targets import TargetSpec


class DatasetSpec(StrictModel):
    """Where the items come from and which fields mean what.

    Args:
        path: a JSONL, CSV or Parquet file, relative to the spec's folder; or, with `hf`, the
            file (or glob) in the repository to read instead of a config's split; or a
            Hugging Face path, `hf://datasets/owner/name[@revision]/file`, which means `hf`,
            `revision` and that file.
        hf: a Hugging Face dataset repository, `owner/name` (docs/datasets.md); needs the `hf`
            extra (`pip install 'assay[hf]'`).
        config: with `hf`: the config (subset) to read; default the repository's default one.
        split: with `hf`: the split to read; default its only split.
        revision: with `hf`: a branch, tag or commit; default the default branch (`main`). A
            branch or tag is resolved to its commit when the spec is validated: the run's spec
            (`spec_json`) and record (`dataset_revision`) hold that commit, and it is part of the
            run's identity.
        id: the field holding a stable item id; without it the id is a hash of the row.
        input: the field holding the item's input.
        expected: the field holding the expected answer, if any.
        annotations: fields kept as the item's annotations; default: every field not mapped above.
        limit: use only the first N rows (handy while writing an eval).
    """

    path: str | None = None
    hf: str | None = Field(default=None, pattern=r"^[\w.\-]+/[\w.\-]+$")
    config: str | None = Field(default=None, min_length=1)
    split: str | None = Field(default=None, min_length=1)
    revision: str | None = Field(default=None, min_length=1)
    id: str | None = None
    input: str = "input"
    expected: str | None = "expected"
    annotations: list[str] | None = None
    limit: int | None = Field(default=None, ge=1, strict=True)

    @field_validator("annotations", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _hf_path(cls, data: Any) -> Any:
        """`path: hf://datasets/owner/name@rev/file` is read as `hf`, `revision` and `path`."""
        if not isinstance(data, dict) or not str(data.get("path", "")).startswith("hf://"):
            return data
        from assay.spec._hub import parse_hf_path

        hf, revision, path = parse_hf_path(data["path"])
        if data.get("hf") not in (None, hf):
            raise ValueError(f"dataset.hf: {data['hf']!r} is not the repository dataset.path names ({hf!r})")
        if revision is not None and data.get("revision") not in (None, revision):
            raise ValueError(
                f"dataset.revision: {data['revision']!r} is not the revision dataset.path names ({revision!r})"
            )
        return {**data, "hf": hf, "revision": data.get("revision") or revision, "path": path or None}

    @model_validator(mode="after")
    def _a_file_or_a_repository(self) -> DatasetSpec:
        if self.hf is None:
            if self.path is None:
                raise ValueError("dataset: give `path` (a file) or `hf` (a Hugging Face dataset, owner/name)")
            given = [name for name in ("config", "split", "revision") if getattr(self, name) is not None]
            if given:
                raise ValueError(f"dataset.{given[0]}: only a Hugging Face dataset (`hf`) has one")
        elif self.path is not None and (self.config is not None or self.split is not None):
            raise ValueError(
                "dataset.path: with `hf` it names the repository's files to read; give it or "
                "`config`/`split`, not both"
            )
        return self


class CompareTo(StrictModel):
    """A sequential compare during the run (docs/statistics.md, "Sequential compare").

    Args:
        baseline: the run the candidate (this run) is compared with, item by item; may be left
            out of the spec and given by `assay run --compare-to RUN_ID` instead.
        scorer: the scorer compared; default the spec's only scorer.
        threshold: the smallest change that matters, in score units (0.02 = 2 points).
        alpha: the chance of a wrong verdict the run accepts, whenever it stops.
        stop: `decided` stops admitting items once the verdict is known; `never` only monitors.
    """

    baseline: str | None = Field(default=None, min_length=1, pattern=r"^[\w.\-]+$")
    scorer: str | None = None
    threshold: float = Field(default=0.02, ge=0, le=1)
    alpha: float = Field(default=0.05, gt=0, lt=1)
    stop: Literal["decided", "never"] = "decided"


class EvalSpec(StrictModel):
    """One eval: a dataset, a target, scorers and how to run them.

    Args:
        name: the eval's name (runs are listed under it): letters, digits, `_`, `.` and `-`.
        description: free text saying what the eval is for; no run reads it.
        dataset: see `DatasetSpec`.
        target: what runs over the dataset: one of the target kinds (`kind: openai`,
            `anthropic`, `python`, `http_agent` or `container`).
        targets: instead of `target`, a matrix: named cells, each a target; every cell runs over
            the same items as its own run, under one matrix id.
        scorers: one or more scorers; names must be unique.
        concurrency: how many target calls the whole run has in flight at most.
        scorer_concurrency: how many scorers run at once on one item.
        trials: how many times each item is run.
        seed: the random seed: recorded in the run's identity; sent to `openai` models as `seed`
            and passed to a `python` function that takes a `seed` parameter.
        item_timeout: seconds one item (target call with its retries) may take; past it: `failed`.
        fail_on_item_error_rate: the run fails its gate (status `failed_gate`, exit 1) when
            failed / attempted exceeds this (1 disables).
        fail_on_scorer_error_rate: the run fails its gate (status `failed_gate`, exit 1) when a
            scorer's failed / (scored + failed) exceeds this (1 disables); the same gate
            `assay compare` and the nightly apply (`--max-scorer-error-rate`, default 0.05).
        budget: a USD limit on measured spend (`"$5"`, `"0.50"`); once reached no new item starts
            (`budget_skipped`), a call not yet sent is refused (`budget_interrupted`) and
            model-graded scorers are skipped; deterministic scorers still score.
        prices: USD per million tokens by exact model name, laid over the shipped price table
            (`assay/data/prices.json`, dated in its `_as_of`); a model with no price makes cost
            `incomplete` (reason `unpriced`), never $0.
        capture_requests: `true`, or `{max_record_bytes, max_run_bytes, max_queue_bytes}`: every
            model call — generation and judging — is stored as `start / attempt / end` records
            in the `requests/` dataset, redacted (`assay requests export`, docs/cli.md).
        redact: regular expressions whose matches never reach captured records (API keys,
            bearer tokens and `sk-` keys are always redacted).
        policy: `module:function`, an async function driving each attempt's session with
            `start(prompt)` / `resume(prompt)` (docs/sessions.md); the spec's folder is importable.
            Without one, each attempt is one `start` with the item's prompt.
        attempts: run each item x trial up to this many times, each in a fresh session, stopping
            at the first attempt that passes; the best attempt is kept (docs/sessions.md).
        tags: free labels, stored on the run.
        compare_to: compare with a baseline run while running, and stop when the verdict is
            known (`CompareTo`); the items then run in a seeded random order.
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
    fail_on_scorer_error_rate: float = Field(default=0.05, ge=0, le=1, strict=True)
    budget: str | None = None
    prices: dict[str, Price] = Field(default_factory=dict)
    capture_requests: bool | CaptureSettings = False
    redact: list[str] = Field(default_factory=list)
    policy: str | None = Field(default=None, pattern=r"^[\w.]+:[\w.]+$")
    attempts: int = Field(default=1, ge=1, le=100, strict=True)
    tags: list[str] = Field(default_factory=list)
    compare_to: CompareTo | None = None

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
    def _compare_to_names_a_scorer(self) -> EvalSpec:
        compare = self.compare_to
        if compare is None:
            return self
        names = [scorer.name for scorer in self.scorers]
        if compare.scorer is None and len(names) > 1:
            raise ValueError(
                f"compare_to.scorer: the spec has several scorers ({', '.join(names)}): name one"
            )
        if compare.scorer is not None and compare.scorer not in names:
            raise ValueError(
                f"compare_to.scorer: {compare.scorer!r} is not one of the spec's scorers ({', '.join(names)})"
            )
        if self.targets is not None:
            raise ValueError("compare_to: not with a matrix (`targets`); compare one target's run")
        return self

    @property
    def compared_scorer(self) -> str | None:
        """The scorer `compare_to` compares, if any."""
        if self.compare_to is None:
            return None
        return self.compare_to.scorer or self.scorers[0].name

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
