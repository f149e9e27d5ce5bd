"""A run's budget shared by the processes that execute it (assay/calls/budget_share.py): two
workers' budgets against one host's state, in-process; the whole path on a real Dask cluster is
in tests/orchestrate/test_dask.py."""

from __future__ import annotations

import asyncio

import pytest

from assay.calls.budget_share import FleetBudget, SharedBudget
from assay.errors import BudgetDenied
from assay.outcomes import BudgetClosedBy


class _Host:
    """The host's rules (`FleetBudget`) reached without a scheduler; `down` makes it unreachable."""

    def __init__(self) -> None:
        self.runs: dict[str, FleetBudget] = {}
        self.down = False

    async def __call__(self, key: str, report: dict) -> dict:
        if self.down:
            raise ConnectionError("nobody there")
        budget = self.runs.setdefault(key, FleetBudget(float(report["start_usd"])))
        return budget.sync(report)

    def abort(self) -> None:
        pass


def test_each_worker_admits_against_the_runs_spend_not_its_own():
    host = _Host()

    async def scenario() -> None:
        a = SharedBudget(1.0, 0.25, key="r:g1", link=host)
        b = SharedBudget(1.0, 0.25, key="r:g1", link=host)
        a.spend(0.5)
        assert not a.closed and not b.closed  # each alone is within the limit
        await a.sync()
        await b.sync()
        assert b.spent_usd == pytest.approx(0.75), "b learns a's spend and the run's earlier spend"
        b.spend(0.3)
        assert b.closed
        with pytest.raises(BudgetDenied):
            b.admit()  # b notes what met the closed budget first
        await b.sync()
        await a.sync()
        assert a.closed and a.closed_by is BudgetClosedBy.OPERATION
        assert host.runs["r:g1"].summary() == {"spent_usd": pytest.approx(1.05), "closed_by": "operation"}

    asyncio.run(scenario())


def test_a_reservation_counts_for_every_worker_until_released():
    host = _Host()

    async def scenario() -> None:
        a = SharedBudget(1.0, 0.0, key="r:g1", link=host)
        b = SharedBudget(1.0, 0.0, key="r:g1", link=host)
        a.reserve(0.8)  # a batch's requests at their maximum cost
        await a.sync()
        b.spend(0.3)
        await b.sync()
        assert b.closed, "a's hold and b's spend reach the limit"
        a.release(0.8)
        a.spend(0.1)  # the batch cost less
        await a.sync()
        await b.sync()
        assert not b.closed and b.spent_usd == pytest.approx(0.4)

    asyncio.run(scenario())


def test_spend_is_reported_as_it_is_spent_and_kept_while_the_host_is_unreachable():
    host = _Host()

    async def scenario() -> None:
        budget = SharedBudget(1.0, 0.0, key="r:g1", link=host)
        reporting = asyncio.create_task(budget.keep_reporting())
        await asyncio.sleep(0)
        budget.spend(0.2)
        await asyncio.sleep(0.02)  # well within SYNC_S: the spend itself triggers the report
        assert host.runs["r:g1"].spent_usd == pytest.approx(0.2)
        reporting.cancel()

        host.down = True
        lost = SharedBudget(1.0, 0.0, key="r:g1", link=host)
        lost.spend(0.3)
        await lost.sync()
        assert lost.spent_usd == pytest.approx(0.3), "its own spend still counts"
        host.down = False  # the host is back: the kept spend is reported
        await lost.sync()
        assert host.runs["r:g1"].spent_usd == pytest.approx(0.5)

    asyncio.run(scenario())
