"""Finding and removing what a run left on the Docker engine.

Every container and network Assay creates carries the `assay.run_id` label; a run removes its
own as it goes, and once more when it ends. `assay clean` removes what a killed process could
not: one run's, or every run's.
"""

from __future__ import annotations

import asyncio
import sys
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Cleaned:
    """What `clean` removed."""

    containers: int
    networks: int


def clean(run_id: str | None = None) -> Cleaned:
    """Remove the containers (with their anonymous volumes), then the networks, labelled with
    `run_id` — or with any run id when it is None."""
    # Imported here: a run that makes no container never loads the Docker SDK.
    import docker.errors

    from assay.sandbox._docker import RUN_LABEL, client

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


def _wait_until_gone(engine: Any, label: str, seconds: float = 30.0) -> None:
    """Removals still in progress (another caller's) finish before networks can go."""
    deadline = time.monotonic() + seconds
    while engine.api.containers(all=True, filters={"label": label}) and time.monotonic() < deadline:
        time.sleep(0.1)


async def clean_after(run_id: str) -> None:
    """At a run's end, remove what its attempts could not (a provision cut off by its deadline, a
    cancelled scorer's fresh sandbox). Never raises: a failure here must not hide how the run
    ended; `assay clean` can finish the job."""
    try:
        await asyncio.to_thread(clean, run_id)
    except Exception as exc:  # noqa: BLE001 - reported, not raised (see above)
        print(
            f"warning: could not remove run {run_id}'s containers: {exc}; run `assay clean {run_id}`",
            file=sys.stderr,
        )


def leftovers(run_id: str) -> list[str]:
    """Names of the run's containers and networks still on the engine (for checks and tests)."""
    from assay.sandbox._docker import RUN_LABEL, client

    engine = client()
    try:
        label = f"{RUN_LABEL}={run_id}"
        containers = engine.api.containers(all=True, filters={"label": label})
        return [f"container {c['Names'][0].lstrip('/')}" for c in containers] + [
            f"network {n.name}" for n in engine.networks.list(filters={"label": label})
        ]
    finally:
        engine.close()
