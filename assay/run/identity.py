"""A run's identity: a hash of everything that decides its results.

Dataset content (and a Hugging Face dataset's commit), the target's result-deciding config, the scorers (name, kind, version, params),
trials and seed, and how items are driven: the session policy and the number of attempts.
Operational settings — concurrency, timeouts, retries, the API key's variable, the endpoint's
address (each target kind names its own: `TargetKind.operational`) — are left out, so a run can
resume on another port or with more concurrency and still be the same run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.evaluators import Scorer
from assay.spec import EvalSpec
from assay.spec.dataset import Item, canonical_json, dataset_hash
from assay.targets import kind_of


def _hash(value: Any) -> str:
    return hashlib.sha256(canonical_json(value).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class Identity:
    """The parts of a run's identity and their combined hash."""

    dataset: str
    target: str
    scorers: str
    trials: int
    seed: int
    policy: str | None = None
    attempts: int = 1
    fixtures: str | None = None
    dataset_revision: str | None = None

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Identity:
        """The identity a run was recorded with (its record's `*_hash`, trials, seed, policy and
        attempts columns; a run from before sessions recorded no attempts: one)."""
        return cls(
            dataset=record["dataset_hash"],
            target=record["target_hash"],
            scorers=record["scorers_hash"],
            trials=record["trials"],
            seed=record["seed"],
            policy=record.get("policy"),
            attempts=record.get("attempts") or 1,
            fixtures=record.get("fixtures_hash"),
            dataset_revision=record.get("dataset_revision"),
        )

    @property
    def digest(self) -> str:
        parts: list[Any] = [self.dataset, self.target, self.scorers, self.trials, self.seed]
        # Only when used: the runs stored before sessions and fixtures existed keep their digests.
        if self.policy is not None or self.attempts != 1:
            parts += [self.policy, self.attempts]
        if self.fixtures is not None:
            parts += [{"fixtures": self.fixtures}]
        if self.dataset_revision is not None:
            parts += [{"dataset_revision": self.dataset_revision}]
        return _hash(parts)

    def differences(self, other: Identity) -> list[str]:
        """What changed from `other` to this identity, in words."""
        changed = []
        if self.dataset != other.dataset:
            changed.append("the dataset's content")
        if self.target != other.target:
            changed.append("the target's config")
        if self.scorers != other.scorers:
            changed.append("the scorers")
        if self.trials != other.trials:
            changed.append(f"trials ({other.trials} -> {self.trials})")
        if self.seed != other.seed:
            changed.append(f"seed ({other.seed} -> {self.seed})")
        if self.policy != other.policy:
            changed.append(f"policy ({other.policy} -> {self.policy})")
        if self.attempts != other.attempts:
            changed.append(f"attempts ({other.attempts} -> {self.attempts})")
        if self.fixtures != other.fixtures:
            changed.append("the fixture files' content")
        if self.dataset_revision != other.dataset_revision:
            changed.append(
                f"the dataset's revision ({other.dataset_revision} -> {self.dataset_revision}; "
                f"`revision: {other.dataset_revision}` in the spec's dataset reads the run's data again)"
            )
        return changed


def scorers_digest(scorers: list[Scorer]) -> str:
    """A hash of the scorers' names, kinds, versions and parameters, in name order."""
    return _hash(
        [{"version": type(s).version, **s.identity()} for s in sorted(scorers, key=lambda s: s.name)]
    )


def identity_of(spec: EvalSpec, items: list[Item], spec_dir: Path | None = None) -> Identity:
    """The run's identity. With `spec_dir`, the content of the files the target hands the agent
    (a container's fixture and checks folders, an http_agent's local fixture files) and those the
    scorers hand their sandboxes (`code_exec`'s `files` folders) is part of it: a fixture changed
    under a run makes a resume refuse, like a changed dataset; and a chat target's Python tools
    are their schemas (`ChatKind.identity`)."""
    target = kind_of(spec.target).identity(spec.target, spec_dir)
    return Identity(
        fixtures=fixtures_digest(spec, items, spec_dir) if spec_dir is not None else None,
        dataset=dataset_hash(items)[:16],
        target=_hash(target),
        scorers=scorers_digest(spec.scorers),
        trials=spec.trials,
        seed=spec.seed,
        policy=spec.policy,
        attempts=spec.attempts,
        # A Hugging Face dataset's commit (validation pinned `revision` to it): a branch that
        # moved is another dataset, even where the rows read the same.
        dataset_revision=spec.dataset.revision if spec.dataset.hf is not None else None,
    )


def spec_hash(spec: EvalSpec) -> str:
    return _hash(spec.model_dump(mode="json"))


def fixtures_digest(spec: EvalSpec, items: list[Item], spec_dir: Path) -> str | None:
    """A hash of every fixture file's path and bytes the target and the scorers use, or None
    when they use none."""
    files = kind_of(spec.target).fixture_files(spec.target, items, spec_dir)
    files += [path for scorer in spec.scorers for path in scorer.fixture_files(items, spec_dir)]
    if not files:
        return None
    digest = hashlib.sha256()
    for path in sorted(files):
        digest.update(str(path).encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]
