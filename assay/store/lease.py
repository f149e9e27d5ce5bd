"""Leases: one process drives a run at a time.

A run being driven holds `<store>/leases/<run_id>.json` — its holder (host and pid, and the Prefect
flow run if any) and when it was last renewed — and renews it while it works. Another process that
tries to drive the same run is refused: "run X is held by H since T". A lease can be taken over
when it expired (not renewed for `ttl` seconds), when its holder is a process on this host that no
longer exists (a SIGKILLed run can be resumed at once), or by a retry of the same Prefect flow run.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from assay.errors import InputError


def _ttl() -> float:
    return float(os.environ.get("ASSAY_LEASE_TTL_S", "30"))


class RunHeldError(InputError):
    """Another live process drives the run."""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class Lease:
    """This process's hold on one run.

    Args:
        root: the store's root.
        run_id: the run.
        flow_run_id: the Prefect flow run driving it, if any.
    """

    def __init__(self, root: Path, run_id: str, flow_run_id: str | None = None) -> None:
        self.path = root / "leases" / f"{run_id}.json"
        self.run_id = run_id
        self.mine = {
            "host": socket.gethostname(),
            "pid": os.getpid(),
            "flow_run_id": flow_run_id,
            "token": uuid.uuid4().hex,
            "since": datetime.now(UTC).isoformat(),
        }

    def _read(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None

    def _takeable(self, held: dict[str, Any]) -> bool:
        if time.time() - held.get("renewed", 0) > held.get("ttl", _ttl()):
            return True
        if held.get("host") == self.mine["host"] and not _alive(int(held.get("pid", 0))):
            return True
        same_flow_run = (
            held.get("flow_run_id") is not None and held.get("flow_run_id") == self.mine["flow_run_id"]
        )
        return same_flow_run or held.get("token") == self.mine["token"]

    def _write(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".tmp-{uuid.uuid4().hex}")
        tmp.write_text(json.dumps({**self.mine, "renewed": time.time(), "ttl": _ttl()}))
        os.replace(tmp, self.path)

    def acquire(self) -> None:
        """Hold the run, or raise `RunHeldError` naming who holds it."""
        held = self._read()
        if held is not None and not self._takeable(held):
            raise RunHeldError(
                f"run {self.run_id} is held by {held.get('host')}:{held.get('pid')} since {held.get('since')}"
                + (f" (Prefect flow run {held['flow_run_id']})" if held.get("flow_run_id") else "")
                + f"; its lease expires {held.get('ttl', _ttl()):g} s after its last renewal"
            )
        self._write()
        # Two processes taking over at once both wrote: the file says which one won.
        if (self._read() or {}).get("token") != self.mine["token"]:
            raise RunHeldError(f"run {self.run_id} was taken by another process at the same moment")

    def renew(self) -> None:
        held = self._read()
        if held is None or held.get("token") == self.mine["token"]:
            self._write()

    def release(self) -> None:
        if (self._read() or {}).get("token") == self.mine["token"]:
            self.path.unlink(missing_ok=True)


@asynccontextmanager
async def renewing(leases: list[Lease]) -> AsyncIterator[None]:
    """Renew the leases every third of their time to live while the block runs; release them after."""

    async def renew() -> None:
        while True:
            await asyncio.sleep(_ttl() / 3)
            for lease in leases:
                lease.renew()

    task = asyncio.create_task(renew())
    try:
        yield
    finally:
        task.cancel()
        for lease in leases:
            lease.release()
