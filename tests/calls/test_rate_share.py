"""One rate controller for a fleet (assay/calls/fleet.py): separate OS processes — two `assay
run`s — share one window through a real Dask scheduler started on 127.0.0.1, against the real
mock server (its token-bucket mode for the account's limit)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from assay.calls import fleet
from assay.calls.aimd import PACE_DECREASE
from assay.calls.fleet import FleetWindow, SharedRateController, fair_shares
from assay.cli import main
from assay.store import Store
from assay.testing.dask_scheduler import dask_scheduler
from assay.testing.mock_openai import MockOpenAIServer
from tests.conftest import openai_spec, start_assay


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with dask_scheduler(tmp_path_factory.mktemp("dask")) as address:
        yield address


def _two_runs(tmp_path: Path, base_url: str, share: str, *, n: int, concurrency: int) -> list[dict]:
    """Two `assay run` processes started together on one spec, sharing through `share`; their
    summaries."""
    spec = openai_spec(tmp_path, base_url, n=n, concurrency=concurrency, fail_on_item_error_rate=1)
    env = {"ASSAY_RATE_SHARE": share, "DO_NOT_TRACK": "1"}
    procs = [
        start_assay("run", str(spec), "--store", str(tmp_path / f"store{i}"), "--json", "-q", env=env)
        for i in range(2)
    ]
    outputs = [proc.communicate(timeout=240) for proc in procs]
    for proc, (_, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 0, err[-3000:]
    return [json.loads(out) for out, _ in outputs]


@pytest.mark.slow
def test_two_runs_in_two_processes_share_one_window_through_the_dask_scheduler(tmp_path, scheduler):
    """Each run may have 8 calls in flight; sharing one controller, the two together never have
    more than 8 at the server (each on its own would reach 16)."""
    with MockOpenAIServer(latency_ms=200) as mock:
        summaries = _two_runs(tmp_path, mock.base_url, scheduler, n=160, concurrency=8)
        stats = mock.stats()
    assert [s["items"]["completed"] for s in summaries] == [160, 160]
    assert stats["by_status"] == {"200": 320}
    assert stats["peak_in_flight"] <= 8
    for summary in summaries:
        rate = summary["rate_control"]
        assert rate["share"] == "dask" and rate["members"] == 2 and rate["ceiling"] == 8
        assert rate["responses"] == 160  # this process's answers; the window is the fleet's


@pytest.mark.slow
def test_two_runs_sharing_an_account_cost_time_never_items(tmp_path, scheduler):
    """Two runs at concurrency 16 against an account allowing 1,200 requests a minute (20 a
    second, answered in 200 ms): together they stay under it — no item fails, ≤ 5 % refused."""
    with MockOpenAIServer(latency_ms=200) as mock:
        mock.configure(rate_limits={"rpm": 1200})
        started = time.monotonic()
        summaries = _two_runs(tmp_path, mock.base_url, scheduler, n=150, concurrency=16)
        wall = time.monotonic() - started
        stats = mock.stats()
    assert [s["items"]["failed"] for s in summaries] == [0, 0]
    assert [s["items"]["completed"] for s in summaries] == [150, 150]
    refused = stats["by_status"].get("429", 0)
    assert refused <= 0.05 * stats["requests"], stats["by_status"]
    # Never over the account's rate: the bucket's second of burst plus 20 a second.
    assert stats["by_status"]["200"] <= 20 + 20 * wall
    stored = [
        json.loads(Store(tmp_path / f"store{i}").read_run(s["run_id"])["rate_control"])
        for i, s in enumerate(summaries)
    ]
    assert {r["share"] for r in stored} == {"dask"}
    assert sum(r["rate_limited"] for r in stored) == refused


STRICT = {"burst": 5, "headers": "refusals"}  # a small burst, the limit said only on 429s (issue 25)


@pytest.mark.slow
@pytest.mark.parametrize("share", ["local", "dask"])
def test_two_runs_on_an_account_with_a_small_burst_refuse_few_calls(tmp_path, scheduler, share):
    """Two processes at concurrency 8 against an account allowing 1,200 calls a minute but only 5
    at once, which says its limit only on its 429s, answering in 20 ms: one slot alone makes 50
    calls a second, so windows of calls in flight cannot hold it (two thirds of the calls were
    refused, one controller per process or one shared); paced to the rate the provider admits,
    each process learning its own (`local`) or the fleet one (`dask`), few are."""
    with MockOpenAIServer(latency_ms=20) as mock:
        mock.configure(rate_limits={"rpm": 1200, **STRICT})
        summaries = _two_runs(
            tmp_path, mock.base_url, scheduler if share == "dask" else "local", n=100, concurrency=8
        )
        stats = mock.stats()
    assert [s["items"]["completed"] for s in summaries] == [100, 100]
    refused = stats["by_status"].get("429", 0)
    assert refused <= 0.25 * stats["requests"], stats["by_status"]
    assert all(s["rate_control"]["learned_rpm"] <= 1200 for s in summaries)


def test_the_fleets_pace_is_learned_from_every_members_answers_and_divided_as_the_window_is():
    window = FleetWindow("e m", ceiling=16)
    report = {"ceiling": 16, "in_flight": 0, "waiting": 8, "answers": []}
    alone = window.sync({**report, "member": "a"})
    assert alone["rpm"] is None, "no refusal yet: unpaced"
    refusal = [429, {"retry-after": "0.05", "x-ratelimit-limit-requests": "1200"}]
    window.sync({**report, "member": "b", "answers": [[200, {}]] * 12 + [refusal]})
    assert window.controller.pace.rpm == pytest.approx(1200 * PACE_DECREASE)
    for _ in range(3):  # the members sync in turn: each gets its part of the window, and of the pace
        grants = [window.sync({**report, "member": member}) for member in ("a", "b")]
    assert grants[0]["quota"] == grants[1]["quota"] > 0
    assert [g["rpm"] for g in grants] == pytest.approx([1200 * PACE_DECREASE / 2] * 2)


def test_the_window_is_divided_fairly_by_demand():
    assert fair_shares(10, {"a": 2, "b": 20, "c": 20}) == {"a": 2, "b": 4, "c": 4}
    assert fair_shares(10, {"a": 0, "b": 3}) == {"a": 0, "b": 3}
    assert fair_shares(2, {"a": 5, "b": 5, "c": 9}) == {"a": 0, "b": 1, "c": 1}
    assert sum(fair_shares(7, {"a": 9, "b": 9}).values()) == 7


def test_a_refusal_seen_by_one_member_pauses_and_halves_for_all():
    window = FleetWindow("e m", ceiling=32)
    report = {"ceiling": 32, "in_flight": 0, "waiting": 32, "answers": [[200, {}]] * 12}
    first = window.sync({**report, "member": "a"})
    second = window.sync({**report, "member": "b", "answers": []})
    assert first["window"] == second["window"] == 16  # slow start: 4 + 12
    assert (first["quota"], second["quota"]) == (16, 0)  # a holds the window until it syncs
    assert window.sync({**report, "member": "a", "answers": []})["quota"] == 8
    # a may have admitted up to its earlier 16 since its report: b waits for a's next one.
    assert window.sync({**report, "member": "b", "answers": []})["quota"] == 0
    assert window.sync({**report, "member": "a", "answers": []})["quota"] == 8
    assert window.sync({**report, "member": "b", "answers": []})["quota"] == 8
    refused = window.sync({**report, "member": "a", "answers": [[429, {"retry-after": "2"}]]})
    other = window.sync({**report, "member": "b", "answers": []})
    assert refused["window"] == other["window"] == 8
    assert 1.5 < other["pause_s"] <= 2.0
    assert refused["quota"] + other["quota"] <= 8
    window.sync({"member": "a", "leaving": True})
    assert window.sync({**report, "member": "b", "answers": []})["quota"] == 8


def test_rpm_is_divided_as_the_window_is():
    window = FleetWindow("e m", ceiling=16)
    report = {"ceiling": 16, "rpm": 1200, "in_flight": 0, "answers": []}
    assert window.sync({**report, "member": "a", "waiting": 3})["rpm"] == 1200  # alone: all of it
    assert window.sync({**report, "member": "b", "waiting": 3})["rpm"] == 300  # 1 of a's 3 + 1
    assert window.sync({**report, "member": "a", "waiting": 3})["rpm"] == 800  # a's 2 of 2 + b's 1
    assert window.sync({**report, "member": "b", "waiting": 3})["rpm"] == 400  # a may hold 3 still
    assert window.sync({**report, "member": "a", "waiting": 3})["rpm"] == 1200 * 2 / 3
    assert window.sync({**report, "member": "b", "waiting": 3})["rpm"] == 600  # 2 and 2


def test_a_member_whose_scheduler_is_gone_controls_its_calls_alone(monkeypatch):
    """Nothing listens at the scheduler's address: the member keeps trying a while, then admits
    its calls as a local controller would, and says so."""
    from assay.calls import fleet_dask  # Dask's client (~0.5 s): not at collection

    monkeypatch.setattr(fleet, "_FALLBACK_AFTER_S", 0.3)
    # Each try waits out its connect timeout (a refused connection is retried until then): 5 s
    # in a run, a fraction of that here, where a try still fails the same way.
    monkeypatch.setattr(fleet_dask, "_RPC_TIMEOUT_S", 0.2)

    async def scenario() -> SharedRateController:
        controller = SharedRateController(
            "e m", 4, sync=fleet_dask.DaskLink(f"tcp://127.0.0.1:{_free_port()}"), share="dask"
        )
        async with controller:
            pass
        return controller

    controller = asyncio.run(asyncio.wait_for(scenario(), 30))
    assert controller.summary()["share"] == "dask" and controller.limit >= 1


def test_a_bad_share_setting_is_refused_naming_it(tmp_path, mock, monkeypatch, capsys):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    monkeypatch.setenv("ASSAY_RATE_SHARE", "redis://x")
    assert main(["run", str(spec), "--store", str(tmp_path / "s")]) == 2
    assert "ASSAY_RATE_SHARE" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


@pytest.mark.slow
def test_code_on_a_dask_worker_shares_through_its_scheduler(scheduler, tmp_path):
    """A `--dask` run's shards run in tasks on the workers: there, without any setting, the
    controllers are shared through the worker's own scheduler (ASSAY_RATE_SHARE still wins)."""
    from distributed import Client

    from assay.calls.rate import current_share

    log = (tmp_path / "worker.log").open("wb")
    worker = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_worker", scheduler, "--nworkers", "1"]
        + ["--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={k: v for k, v in os.environ.items() if k != "ASSAY_RATE_SHARE"},
        start_new_session=True,
    )
    try:
        with Client(scheduler, timeout=60) as client:
            client.wait_for_workers(1, timeout=60)
            assert client.submit(current_share, pure=False).result(timeout=60) == scheduler
        assert current_share() == "local"  # here, in no worker's task
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        log.close()


class _InProcessHost:
    """A `fleet.Link` to a `FleetWindow` in this process: the host's rules without a scheduler,
    syncing seldom, so answers wait in the member until it reports them."""

    period_s = 30.0

    def __init__(self, ceiling: int) -> None:
        self.window = FleetWindow("e m", ceiling)

    async def __call__(self, name: str, report: dict) -> dict:
        return self.window.sync(report)

    def abort(self) -> None:
        pass


def test_a_closing_member_reports_its_last_answers_to_the_fleet():
    """The answers a member got since its last report reach the host when it closes — leaving, or
    staying for another run's call still in flight — so a run that reads the fleet's controller
    after its targets closed counts every call it made."""
    host = _InProcessHost(4)

    async def scenario() -> None:
        member = SharedRateController("e m", 4, sync=host, share="dask")
        for _ in range(3):  # one run's calls, answered between two syncs
            await member.acquire()
            member.observe(200, {})
            member.release()
        await member.acquire()  # another run's call, still in flight
        await member.aclose()
        assert host.window.controller.responses == 3 and len(host.window.members) == 1
        member.observe(200, {})
        member.release()
        await member.aclose()
        assert host.window.controller.responses == 4 and not host.window.members

    asyncio.run(asyncio.wait_for(scenario(), 30))
