"""Finding and removing what a run left on the Docker engine.

Every container and network Assay creates carries the `assay.run_id` label; a run removes its
own as it goes, and once more when it ends. `assay clean` removes what a killed process could
not: one run's, or every run's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import docker.errors

from assay.sandbox._docker import RUN_LABEL, client


@dataclass(frozen=True, slots=True)
class Cleaned:
    """What `clean` removed."""

    containers: int
    networks: int


def clean(run_id: str | None = None) -> Cleaned:
    """Remove the containers (with their anonymous volumes), then the networks, labelled with
    `run_id` — or with any run id when it is None."""
    label = RUN_LABEL if run_id is None else f"{RUN_LABEL}={run_id}"
    engine = client()
    try:
        # The low-level listing: the high-level one inspects each container, racing removals.
        containers = engine.api.containers(all=True, filters={"label": label})
        for container in containers:
            try:
                engine.api.remove_container(container["Id"], force=True, v=True)
            except docker.errors.NotFound:
                pass  # removed meanwhile by the run itself
            except docker.errors.APIError as exc:
                if exc.status_code != 409:  # 409: a removal already in progress
                    raise
        _wait_until_gone(engine, label)
        networks = engine.networks.list(filters={"label": label})
        for network in networks:
            try:
                network.remove()
            except docker.errors.NotFound:
                pass
        return Cleaned(len(containers), len(networks))
    finally:
        engine.close()


def _wait_until_gone(engine: docker.DockerClient, label: str, seconds: float = 30.0) -> None:
    """Removals still in progress (another caller's) finish before networks can go."""
    deadline = time.monotonic() + seconds
    while engine.api.containers(all=True, filters={"label": label}) and time.monotonic() < deadline:
        time.sleep(0.1)


def leftovers(run_id: str) -> list[str]:
    """Names of the run's containers and networks still on the engine (for checks and tests)."""
    engine = client()
    try:
        label = f"{RUN_LABEL}={run_id}"
        containers = engine.api.containers(all=True, filters={"label": label})
        return [f"container {c['Names'][0].lstrip('/')}" for c in containers] + [
            f"network {n.name}" for n in engine.networks.list(filters={"label": label})
        ]
    finally:
        engine.close()
