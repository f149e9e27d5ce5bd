"""What a run checks against the harness's capabilities before anything runs: each item's
fixture files and input, and the spec's model override."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from assay.errors import DatasetError
from assay.spec import HttpAgentTarget
from assay.spec.dataset import Item
from assay.targets.http_agent._files import files_refused, item_files, local_problem
from assay.targets.http_agent._protocol import Capabilities, input_problem

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

_MAX_PROBLEMS = 50


def check_items(
    caps: Capabilities,
    validator: Validator | None,
    items: list[Item],
    *,
    spec_dir: Path | None,
    source: str,
) -> list[dict[str, str]]:
    """The items the harness cannot take (`[{item_id, reason}]`: fixture files it does not
    accept; the run skips them).

    Args:
        caps: the harness's capabilities.
        validator: its `input_schema`'s validator, if it has one.
        items: the run's items.
        spec_dir: the folder local fixture files are relative to (the spec's).
        source: what `DatasetError` names as the source (the harness's URL).

    Raises:
        DatasetError: items whose `files` field is malformed, whose local fixture files are
            missing or whose input fails the `input_schema` (all of them, in one error), or
            nothing left to run.
    """
    problems: list[str] = []
    dropped: list[dict[str, str]] = []
    runnable: list[Item] = []
    for item in items:
        try:
            files = item_files(item)
        except (ValueError, TypeError) as exc:
            problems.append(f"item {item.item_id!r}: {exc}")
            continue
        reason = files_refused(caps, files)
        if reason:
            dropped.append({"item_id": item.item_id, "reason": reason})
            continue
        missing = local_problem(spec_dir, files)
        if missing:
            problems.append(f"item {item.item_id!r}: field 'files': {missing}")
        runnable.append(item)
    for item in runnable:
        problem = input_problem(validator, item.input)
        if problem:
            problems.append(f"item {item.item_id!r}: {problem} (the harness's input_schema)")
    if problems:
        raise DatasetError(_capped(problems), source=source)
    if items and not runnable:
        raise DatasetError(
            f"nothing to run: every item has fixture files and {dropped[0]['reason']}", source=source
        )
    return dropped


def model_warnings(spec: HttpAgentTarget, caps: Capabilities) -> list[str]:
    """A warning when the spec names a model the harness does not let Assay choose."""
    if spec.model is not None and not caps.accepts.model_override:
        return [
            (
                f"the harness does not accept a model override: target.model {spec.model!r} "
                "is not sent and the harness runs its default model"
            )
        ]
    return []


def _capped(problems: list[str]) -> list[str]:
    if len(problems) <= _MAX_PROBLEMS:
        return problems
    return [*problems[:_MAX_PROBLEMS], f"... and {len(problems) - _MAX_PROBLEMS} more items"]
