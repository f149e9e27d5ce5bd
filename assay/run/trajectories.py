"""A run's trajectories as ATIF (`assay trajectories export RUN`): for each current item x trial
whose attempt kept steps, one ATIF trajectory — the harness's own ATIF document where it sent one
(`atif.json`), else the kept steps (`trajectory.json`: an http_agent's harness steps, a container
agent's parsed stream) converted by `assay.targets.atif.to_atif`. A session's several harness
runs become one trajectory, their steps numbered on."""

from __future__ import annotations

import json
from typing import Any

from assay import __version__
from assay.errors import InputError
from assay.store import Store, current_items
from assay.targets.atif import SCHEMA_VERSION, Agent, Trajectory, to_atif

_STEPS_FILE = "trajectory.json"
_ATIF_FILE = "atif.json"


def run_trajectories(store: Store, run_id: str) -> list[Trajectory]:
    """Every current item x trial's trajectory, in item order.

    Raises:
        InputError: no item of the run kept a trajectory (its target produced no steps).
    """
    record = store.read_run(run_id)
    agent = _agent(record)
    items = current_items(store.run_items(run_id)).sort("item_index", "trial")
    found = [
        trajectory
        for row in items.iter_rows(named=True)
        if (trajectory := _trajectory(store, run_id, agent, row)) is not None
    ]
    if not found:
        raise InputError(f"run {run_id}: no item kept a trajectory (its target produced no steps)")
    return found


def item_trajectory(
    store: Store, run_id: str, record: dict[str, Any], row: dict[str, Any]
) -> Trajectory | None:
    """One item x trial's trajectory (its items row), None when its attempt kept no steps
    (`assay view`'s item page)."""
    return _trajectory(store, run_id, _agent(record), row)


def _trajectory(store: Store, run_id: str, agent: Agent, row: dict[str, Any]) -> Trajectory | None:
    parts = [p for p in (_part(store, row["artifacts"], path, agent) for path in row["artifacts"] or []) if p]
    return _joined(parts, row, run_id) if parts else None


def _part(store: Store, artifacts: list[str], path: str, agent: Agent) -> Trajectory | None:
    """One harness run's (or one attempt's) trajectory, from the files it kept."""
    folder, _, name = path.rpartition("/")
    if name != _STEPS_FILE:
        return None
    try:
        if f"{folder}/{_ATIF_FILE}" in artifacts:
            return Trajectory.model_validate(_read(store, f"{folder}/{_ATIF_FILE}"))
        document = _read(store, path)
    except (OSError, ValueError):
        return None  # deleted or damaged since: left out, as a target that kept none
    steps = document.get("steps") if isinstance(document, dict) else None
    if not isinstance(steps, list):
        return None
    session = document.get("harness_run_id") if isinstance(document.get("harness_run_id"), str) else folder
    return to_atif(steps, session_id=session, agent=agent)


def _joined(parts: list[Trajectory], row: dict[str, Any], run_id: str) -> Trajectory:
    """The item x trial's trajectory: its parts' steps in order, and where it came from."""
    where = {"run_id": run_id, "item_id": row["item_id"], "trial": row["trial"], "retry": row.get("retry", 0)}
    if len(parts) == 1:
        only = parts[0]
        return only.model_copy(update={"extra": {**(only.extra or {}), "assay": where}})
    steps = []
    for part in parts:
        for step in part.steps:
            steps.append(step.model_copy(update={"step_id": len(steps) + 1}))
    return Trajectory(
        schema_version=SCHEMA_VERSION,
        session_id=f"{run_id}/{row['item_id']}/{row['trial']}",
        agent=parts[0].agent,
        steps=steps,
        extra={"assay": {**where, "sessions": [p.session_id for p in parts]}},
    )


def _agent(record: dict[str, Any]) -> Agent:
    """Who produced the run's trajectories: the container agent's adapter (and the CLI version
    preflight asked it), else the target's kind."""
    spec = json.loads(record.get("spec_json") or "{}")
    target = spec.get("target") or {}
    snapshot = json.loads(record.get("target_snapshot") or "null") or {}
    agent = target.get("agent") or {}
    return Agent(
        name=agent.get("adapter") or str(target.get("kind") or "assay"),
        version=str(snapshot.get("agent_version") or f"assay {__version__}"),
        model_name=agent.get("model") or target.get("model") or record.get("model"),
    )


def _read(store: Store, path: str) -> Any:
    return json.loads(store.read_artifact(path))
