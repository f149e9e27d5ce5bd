"""One rate controller for a fleet shared through a Prefect server (`ASSAY_RATE_SHARE=prefect`,
assay/calls/fleet_prefect.py): two `assay run` processes — Prefect flow runs of one real `prefect
server start` on 127.0.0.1 — share one window held as a global concurrency limit, against the
real mock server in its rate-limit mode."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from assay.calls import fleet
from assay.calls.fleet import SharedRateController
from assay.cli import main
from assay.store import Store
from assay.testing.mock_openai import MockOpenAIServer
from tests.conftest import openai_spec, start_assay, wait_for
from tests.helpers.prefect_server import PrefectAPI, serving_prefect

CLI_TIMEOUT_S = 300
# Prefect's client (~2 s to import) is imported by the tests that use it, not at collection: the
# fast loop (`-m "not slow"`) collects this module in each of its processes.


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrefectAPI]:
    """A Prefect server for the module."""
    with serving_prefect(tmp_path_factory.mktemp("prefect-rate-share")) as api:
        yield api


def _two_runs(
    tmp_path: Path, server: PrefectAPI, base_url: str, share: str, *, n: int, concurrency: int
) -> list[dict]:
    """Two `assay run` processes started together on one spec, flow runs of `server`, sharing
    their rate controller through `share`; their summaries."""
    spec = openai_spec(tmp_path, base_url, n=n, concurrency=concurrency, fail_on_item_error_rate=1)
    env = {**server.env, "ASSAY_RATE_SHARE": share}
    procs = [
        start_assay("run", str(spec), "--store", str(tmp_path / f"store{i}"), "--json", "-q", env=env)
        for i in range(2)
    ]
    outputs = [proc.communicate(timeout=CLI_TIMEOUT_S) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-3000:]
    return [json.loads(out) for out, _ in outputs]


def _active_slots(api_url: str, base_url: str) -> list[int]:
    """The slots held on the window's, the members' and the short members' GCLs of the mock."""
    from assay.calls.fleet_prefect import limit_names

    names = limit_names(f"{base_url.rstrip('/')} mock-1")[:3]
    with httpx.Client(base_url=api_url, timeout=10) as client:
        return [int(client.get(f"/v2/concurrency_limits/{name}").json()["active_slots"]) for name in names]


@pytest.mark.prefect
def test_two_runs_share_one_window_through_a_prefect_server(tmp_path, server):
    """The account allows 8 calls in flight (the mock refuses the 9th with a 429) and each run may
    have 8: sharing one window through the Prefect server, the two together never have more than
    8 in flight, so no call is refused. (Each on its own controller reaches 16 and gets 429s.)
    Each run hands its slots back when it ends."""
    from assay.calls.fleet_prefect import LEASE_S

    with MockOpenAIServer(latency_ms=200) as mock:
        mock.configure(rate_limits={"max_in_flight": 8})
        base_url = mock.base_url
        # 300 items: 7.5 s of calls at 8 in flight, so the runs overlap although each flow run's
        # start-up varies by seconds on a loaded machine.
        summaries = _two_runs(tmp_path, server, base_url, "prefect", n=300, concurrency=8)
        stats = mock.stats()
    assert [s["items"]["completed"] for s in summaries] == [300, 300]
    assert stats["by_status"] == {"200": 600}
    assert stats["peak_in_flight"] <= 8
    # Handed back as each run ends — or, where a sync was cut short on a loaded machine after the
    # server granted a lease, when that lease expires.
    wait_for(
        lambda: _active_slots(server.url, base_url) == [0, 0, 0], "the slots given back", timeout=LEASE_S + 60
    )
    for summary in summaries:
        rate = summary["rate_control"]
        assert rate["share"] == "prefect" and rate["members"] == 2 and rate["ceiling"] == 8
        assert rate["responses"] == 300 and rate["rate_limited"] == 0


@pytest.mark.prefect
def test_two_runs_sharing_an_account_through_prefect_cost_time_never_items(tmp_path, server):
    """Two runs at concurrency 16 against an account allowing 1,200 requests a minute (20 a
    second, answered in 200 ms): no item fails, few calls are refused, the account's rate holds."""
    with MockOpenAIServer(latency_ms=200) as mock:
        mock.configure(rate_limits={"rpm": 1200})
        started = time.monotonic()
        summaries = _two_runs(tmp_path, server, mock.base_url, "prefect", n=150, concurrency=16)
        wall = time.monotonic() - started
        stats = mock.stats()
    assert [s["items"]["failed"] for s in summaries] == [0, 0]
    assert [s["items"]["completed"] for s in summaries] == [150, 150]
    refused = stats["by_status"].get("429", 0)
    # Looser than through a Dask scheduler (5 %): a sync costs ~10 ms of a SQLite-backed server
    # unloaded, far more on a loaded machine, so the others hear of a refusal later.
    assert refused <= 0.10 * stats["requests"], stats["by_status"]
    assert stats["by_status"]["200"] <= 20 + 20 * wall
    stored = [
        json.loads(Store(tmp_path / f"store{i}").read_run(s["run_id"])["rate_control"])
        for i, s in enumerate(summaries)
    ]
    assert {r["share"] for r in stored} == {"prefect"}
    assert sum(r["rate_limited"] for r in stored) == refused


# A member in its own process: it leases the whole window (4 slots: a new window's start), says
# so, and then never syncs again, as a process killed mid-run would not.
_HOLDER = """
import asyncio, sys
from assay.calls.fleet_prefect import PrefectLink

async def main():
    link = PrefectLink()
    report = {"member": "held", "ceiling": 4, "in_flight": 0, "waiting": 4, "quota": 0, "answers": []}
    while (grant := await link(sys.argv[1], report))["quota"] < 4:
        report["quota"] = grant["quota"]
    print("held", grant["quota"], flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def _sync_until_granted(name: str, slots: int, timeout: float) -> tuple[int, int, float]:
    """A member in this process asking `slots` of `name`'s window: its first grant, its last,
    and the seconds until it was granted them all (a sync a second, as an idle member's)."""
    from assay.calls.fleet_prefect import PrefectLink

    async def member() -> tuple[int, int, float]:
        link = PrefectLink()
        report = {"member": "later", "ceiling": slots, "in_flight": 0, "waiting": slots, "answers": []}
        started = time.monotonic()
        first = grant = (await link(name, {**report, "quota": 0}))["quota"]
        while grant < slots and time.monotonic() - started < timeout:
            await asyncio.sleep(1.0)  # the server expires leases on its own loop: nothing to wait on
            grant = (await link(name, {**report, "quota": grant}))["quota"]
        await link(name, {"member": "later", "leaving": True})
        return first, grant, time.monotonic() - started

    return asyncio.run(member())


@pytest.mark.prefect
def test_the_slots_of_a_killed_member_come_back_when_its_leases_expire(server):
    """A member killed while holding the whole window gives nothing back; the server takes its
    slots back when its leases expire (60 s, the shortest it grants, plus its 15 s sweep)."""
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from assay.calls.fleet_prefect import LEASE_S

    name = f"http://127.0.0.1:9/v1 killed-{uuid.uuid4().hex[:8]}"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, name],
        env=server.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held 4", holder.stderr.read() if holder.stderr else ""
    finally:
        holder.kill()
        holder.wait()
    with temporary_settings({PREFECT_API_URL: server.url}):
        first, last, waited = _sync_until_granted(name, 4, timeout=LEASE_S + 90)
    assert (first, last) == (0, 4)
    assert waited > LEASE_S - 15  # held until its leases expired, not handed back


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_member_whose_prefect_server_is_gone_controls_its_calls_alone(monkeypatch, caplog):
    """Nothing listens at PREFECT_API_URL: the member keeps trying a while, then admits its calls
    as a local controller would, and says so."""
    import httpcore._async.connection
    from prefect.settings import PREFECT_API_URL, temporary_settings

    from assay.calls.fleet_prefect import PrefectLink

    monkeypatch.setattr(fleet, "_FALLBACK_AFTER_S", 0.3)
    # Each try is Prefect's client retrying the refused connection 3 times, its transport backing
    # off 0.5 s then 1 s (1.5 s a try, two tries before the fallback); a fraction of that here,
    # where a try still fails the same way.
    monkeypatch.setattr(httpcore._async.connection, "RETRIES_BACKOFF_FACTOR", 0.01)

    async def scenario() -> SharedRateController:
        controller = SharedRateController("e m", 4, sync=PrefectLink(), share="prefect")
        async with controller:
            pass
        return controller

    unreachable = {PREFECT_API_URL: f"http://127.0.0.1:{_free_port()}/api"}
    with temporary_settings(unreachable), caplog.at_level(logging.WARNING, logger="assay.calls.fleet"):
        controller = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert controller.summary()["share"] == "prefect" and controller.limit >= 1
    assert "prefect host is unreachable" in caplog.text


def test_sharing_through_prefect_without_a_server_is_refused_naming_the_setting(
    tmp_path, mock, monkeypatch, capsys
):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("ASSAY_RATE_SHARE", "prefect")
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err
    assert "ASSAY_RATE_SHARE" in err and "PREFECT_API_URL" in err
    assert not (tmp_path / "s").exists()
