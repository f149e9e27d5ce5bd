"""Round-trip costs of sharing the rate window through a Prefect server (docs/rate-control.md).

Starts `prefect server start` on 127.0.0.1 (PREFECT_HOME in a temporary directory) and times,
200 sequential calls each: the Prefect API calls a member of `ASSAY_RATE_SHARE=prefect` makes
(read a global concurrency limit, lease / renew / release slots, move its limit, read / write a
Variable), Prefect's own `concurrency()` acquire + release as one slot per request would cost,
and a member's whole sync (`assay.calls.fleet_prefect.PrefectLink`), steady and moving its share.

    .venv/bin/python benchmarks/prefect_gcl.py [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.prefect_server import prefect_env, prefect_server


def _show(label: str, millis: list[float]) -> None:
    ordered = sorted(millis)
    print(
        f"{label:52s} median {statistics.median(ordered):6.1f} ms  "
        f"p90 {ordered[int(0.9 * len(ordered))]:6.1f} ms  (n={len(ordered)})"
    )


async def _timed(label: str, call: Callable[[], Awaitable[Any]], n: int) -> None:
    millis = []
    for _ in range(n):
        started = time.perf_counter()
        await call()
        millis.append((time.perf_counter() - started) * 1000)
    _show(label, millis)


async def api_calls(n: int) -> None:
    """The single API calls, on a limit and a Variable made for the purpose."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.actions import (
        GlobalConcurrencyLimitCreate,
        GlobalConcurrencyLimitUpdate,
        VariableCreate,
        VariableUpdate,
    )
    from prefect.concurrency.asyncio import concurrency

    name = f"measure-{uuid.uuid4().hex[:8]}"
    variable = name.replace("-", "_")
    async with get_client() as client:
        await client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=100_000))
        await client.create_variable(VariableCreate(name=variable, value={"paused_until": 0}))
        path = {"id_or_name": name}
        await _timed(
            "GET /v2/concurrency_limits/{name}",
            lambda: client.request("GET", "/v2/concurrency_limits/{id_or_name}", path_params=path),
            n,
        )
        leases: list[str] = []

        async def lease() -> None:
            response = await client.increment_concurrency_slots_with_lease([name], 1, "concurrency", 60)
            leases.append(response.json()["lease_id"])

        await _timed("POST increment-with-lease", lease, n)
        renewing, releasing = iter(list(leases)), iter(list(leases))
        await _timed("POST leases/{id}/renew", lambda: client.renew_concurrency_lease(next(renewing), 60), n)
        await _timed(
            "POST decrement-with-lease",
            lambda: client.release_concurrency_slots_with_lease(next(releasing)),
            n,
        )
        limits = iter(range(10, 10 + n))
        await _timed(
            "PATCH /v2/concurrency_limits/{name} (limit)",
            lambda: client.update_global_concurrency_limit(
                name, GlobalConcurrencyLimitUpdate(limit=next(limits))
            ),
            n,
        )
        await _timed("GET /variables/name/{name}", lambda: client.read_variable_by_name(variable), n)
        await _timed(
            "PATCH /variables/name/{name}",
            lambda: client.update_variable(VariableUpdate(name=variable, value={"paused_until": 1})),
            n,
        )

        async def per_request() -> None:
            async with concurrency(name, occupy=1, strict=True):
                pass

        await _timed("concurrency(name) acquire + release, per request", per_request, max(1, n // 2))
        await client.delete_global_concurrency_limit_by_name(name)
        await client.delete_variable_by_name(variable)


async def member_syncs(n: int) -> None:
    """A member's syncs: joining, steady (nothing to change), moving its share by a block, leaving."""
    from assay.calls.fleet_prefect import PrefectLink

    link = PrefectLink()
    name = f"http://measure/{uuid.uuid4().hex[:8]} m"
    base = {"member": "a", "ceiling": 8, "rpm": None, "tpm": None}
    started = time.perf_counter()
    await link(name, {**base, "in_flight": 0, "waiting": 4, "quota": 0, "answers": []})
    print(f"{'join (limits made, first grant)':52s} {(time.perf_counter() - started) * 1000:6.1f} ms")
    for _ in range(5):  # the window grows to 8, all held
        await link(name, {**base, "in_flight": 4, "waiting": 4, "quota": 8, "answers": [[200, {}]] * 4})
    steady = {**base, "in_flight": 8, "waiting": 2, "quota": 8, "answers": []}
    await _timed("sync, steady", lambda: link(name, steady), n)
    down = {**base, "in_flight": 4, "waiting": 0, "quota": 4, "answers": []}
    up = {**base, "in_flight": 4, "waiting": 4, "quota": 4, "answers": []}
    moving = []
    for _ in range(max(1, n // 4)):
        started = time.perf_counter()
        await link(name, down)  # releases a block
        await link(name, up)  # leases it again
        moving.append((time.perf_counter() - started) * 1000 / 2)
    _show("sync that releases or leases a block", moving)
    started = time.perf_counter()
    await link(name, {"member": "a", "leaving": True})
    print(f"{'leave (leases released)':52s} {(time.perf_counter() - started) * 1000:6.1f} ms")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, prefect_server(Path(tmp) / "prefect") as api_url:
        os.environ.update(prefect_env(Path(tmp) / "prefect", api_url))
        load = os.getloadavg()
        print(f"prefect server at {api_url}; load average {load[0]:.1f} (1 min) on {os.cpu_count()} cores")
        asyncio.run(api_calls(args.calls))
        asyncio.run(member_syncs(args.calls))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
