"""Which deployments of `prefect.yaml` `assay ui` deploys at its start: those the server lacks, and
those whose entry changed in `prefect.yaml` since `assay ui` last deployed them. The others are
kept as they are on the server, so what the UI changed in them (the nightly's specs, its
schedule) survives a restart.

What was deployed is remembered as a digest of each deployment's entry, written beside the
server's database in Prefect's home (`RECORD`): a digest is recorded only once its deploy
succeeded, and a home with no record (a server that an older `assay ui`, or `prefect deploy`,
filled) has every deployment deployed once.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import yaml
from prefect.client.orchestration import SyncPrefectClient

from assay.errors import InputError

RECORD = "assay-ui-deployed.json"
# The parts of prefect.yaml every deployment is made with, besides its own entry.
_SHARED = ("prefect-version", "build", "push", "pull")


def entry_digests(prefect_yaml: Path) -> dict[str, str]:
    """Each deployment's name and a digest of what deploying it uses: its entry, the file's shared
    steps, and the checkout it is deployed from (the `build` step records its path).

    Raises:
        InputError: prefect.yaml cannot be read or lists no named deployments.
    """
    try:
        document = yaml.safe_load(prefect_yaml.read_text())
        entries = document["deployments"]
        names = [entry["name"] for entry in entries]
    except (OSError, yaml.YAMLError, KeyError, TypeError) as exc:
        raise InputError(f"{prefect_yaml}: no deployments to read ({type(exc).__name__}: {exc})") from None
    shared = {key: document.get(key) for key in _SHARED}
    checkout = str(prefect_yaml.resolve().parent)
    return {
        name: hashlib.sha256(
            json.dumps({"entry": entry, "checkout": checkout, **shared}, sort_keys=True, default=str).encode()
        ).hexdigest()
        for name, entry in zip(names, entries, strict=True)
    }


@dataclass(frozen=True)
class DeployPlan:
    """What to deploy, and what to keep as it is on the server, each in prefect.yaml's order."""

    new: list[str]
    """On the server under no such name: deployed."""
    changed: list[str]
    """Its prefect.yaml entry changed since it was deployed (or it is not known what was): deployed."""
    kept: list[str]
    """Unchanged in prefect.yaml since it was deployed: kept with the server's edits."""

    @property
    def to_deploy(self) -> list[str]:
        return [*self.new, *self.changed]

    def line(self) -> str:
        """The start-up line that says it: `deployments: deployed …; kept your edits of …`."""
        parts = []
        if self.new:
            parts.append(f"deployed {', '.join(self.new)} (new)")
        if self.changed:
            parts.append(f"deployed {', '.join(self.changed)} (changed in prefect.yaml)")
        if self.kept:
            parts.append(
                f"kept {', '.join(self.kept)} as on the server (kept your edits of their parameters "
                "and schedules in the UI; edit their prefect.yaml entries to replace them)"
            )
        return "deployments: " + " · ".join(parts)


def plan_deploys(digests: dict[str, str], recorded: dict[str, str], on_server: set[str]) -> DeployPlan:
    """Sort prefect.yaml's deployments into new, changed and kept.

    Args:
        digests: each deployment's digest now (`entry_digests`).
        recorded: what `assay ui` last deployed (`read_record`).
        on_server: the names of the server's deployments.
    """
    new = [name for name in digests if name not in on_server]
    changed = [name for name in digests if name in on_server and recorded.get(name) != digests[name]]
    kept = [name for name in digests if name in on_server and recorded.get(name) == digests[name]]
    return DeployPlan(new=new, changed=changed, kept=kept)


def deployments_on_server(api_url: str) -> set[str]:
    """The names of the server's deployments.

    Read through Prefect's own client, which retries the 503 a busy SQLite server answers."""
    names: set[str] = set()
    offset, page = 0, 200  # the API's largest page
    with SyncPrefectClient(api_url) as client:
        while True:
            batch = client.read_deployments(offset=offset, limit=page)
            names.update(deployment.name for deployment in batch)
            if len(batch) < page:
                return names
            offset += page


def read_record(home: Path) -> dict[str, str]:
    """What `assay ui` last deployed from this Prefect home: name -> digest ({} when unknown)."""
    try:
        recorded = json.loads((home / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): str(v) for k, v in recorded.items()} if isinstance(recorded, dict) else {}


def write_record(home: Path, recorded: dict[str, str], deployed: dict[str, str]) -> None:
    """Remember `deployed` (name -> digest) on top of `recorded`; written whole or not at all."""
    home.mkdir(parents=True, exist_ok=True)
    partial = home / f"{RECORD}.partial"
    partial.write_text(json.dumps({**recorded, **deployed}, indent=2, sort_keys=True))
    partial.replace(home / RECORD)
