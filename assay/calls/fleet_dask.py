"""The fleet's rate controllers — and a `--dask` run's budget and stop — hosted by a Dask
scheduler (`ASSAY_RATE_SHARE=dask://HOST:PORT`; a `--dask` run's workers use their own scheduler).

A scheduler plugin (`RateShareHost`) keeps one `assay.calls.fleet.FleetWindow` per (endpoint,
model) and answers one comm handler, `assay_rate_sync`; each member reaches it over distributed's
own RPC — the connection a Dask client or worker already speaks, no extra server. The first member
to arrive installs the plugin (`register_scheduler_plugin`, idempotent by name), so any
scheduler whose environment can import `assay` serves (the same environment its workers need).

Why a plugin and not distributed's `Semaphore` / `Variable` / `Lock`: a `Semaphore`'s
`max_leases` is fixed when it is made, so it cannot be an AIMD window, and taking one lease per
request costs a scheduler round trip per call; a `Variable` guarded by a `Lock` costs four round
trips per update and leaves the AIMD state with whoever holds the lock. The plugin does the
update where the state lives, in one round trip per member every `fleet.SYNC_S`
(figures: docs/rate-control.md). A second plugin (`BudgetHost`, handler `assay_budget_sync`)
keeps the spend of each `--dask` run with a budget (`assay.calls.budget_share`) the same way;
a run whose sequential compare decided tells its workers through one of distributed's own events.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from distributed.core import rpc
from distributed.diagnostics.plugin import SchedulerPlugin
from distributed.protocol.pickle import dumps

from assay.calls.budget_share import FleetBudget
from assay.calls.fleet import SYNC_S, FleetWindow

PLUGIN = "assay-rate-share"
HANDLER = "assay_rate_sync"
BUDGET_PLUGIN = "assay-budget"
BUDGET_HANDLER = "assay_budget_sync"
_RPC_TIMEOUT_S = 5.0
_EVENT_POLL_S = 30.0


class RateShareHost(SchedulerPlugin):
    """Keeps the fleet's windows on the scheduler and answers members' syncs."""

    name = PLUGIN

    def __init__(self) -> None:
        self.windows: dict[str, FleetWindow] = {}

    async def start(self, scheduler: Any) -> None:
        scheduler.handlers[HANDLER] = self.sync

    def sync(self, name: str, report: dict[str, Any]) -> dict[str, Any]:
        """One member's report on `name`; its grant back (`FleetWindow.sync`)."""
        window = self.windows.get(name)
        if window is None:
            if report.get("leaving"):
                return {}
            window = self.windows[name] = FleetWindow(name, int(report["ceiling"]))
        return window.sync(report)

    def summary(self, name: str) -> dict[str, Any] | None:
        """The fleet's controller of `name` (`FleetWindow.summary`), None if nobody shared it."""
        window = self.windows.get(name)
        return window.summary() if window is not None else None


class BudgetHost(SchedulerPlugin):
    """Keeps the spend of the `--dask` runs with a budget, by `<run_id>:g<generation>`."""

    name = BUDGET_PLUGIN

    def __init__(self) -> None:
        self.runs: dict[str, FleetBudget] = {}

    async def start(self, scheduler: Any) -> None:
        scheduler.handlers[BUDGET_HANDLER] = self.sync

    def sync(self, key: str, report: dict[str, Any]) -> dict[str, Any]:
        """One worker's report on run `key`; the run's state back (`FleetBudget.sync`)."""
        budget = self.runs.get(key)
        if budget is None:
            budget = self.runs[key] = FleetBudget(float(report["start_usd"]))
        return budget.sync(report)


def run_budget(key: str, dask_scheduler: Any = None) -> dict[str, Any] | None:
    """The spend of run `key` on the scheduler this runs on (`Client.run_on_scheduler`), which
    then forgets it; None when no worker reported any."""
    host = dask_scheduler.plugins.get(BUDGET_PLUGIN) if dask_scheduler is not None else None
    budget = host.runs.pop(key, None) if host is not None else None
    return budget.summary() if budget is not None else None


def set_event(name: str, dask_scheduler: Any = None) -> None:
    """Set distributed's event `name` on the scheduler this runs on (`Client.run_on_scheduler`)."""
    dask_scheduler.extensions["events"].event_set(name)


def clear_event(name: str, dask_scheduler: Any = None) -> None:
    """Clear (forget) distributed's event `name` on the scheduler this runs on."""
    dask_scheduler.extensions["events"].event_clear(name)


async def wait_for_event(address: str, name: str, *, checked: Callable[[bool], None]) -> None:
    """Return once distributed's event `name` is set on the scheduler at `address`, asking it
    directly (the loop this runs on is no Dask client's). `checked(is_set)` is called once its
    state is first known. Raises ConnectionError when the scheduler cannot be reached.
    """
    scheduler = rpc(address, timeout=_RPC_TIMEOUT_S)
    try:
        is_set = bool(await scheduler.event_is_set(name=name))
        checked(is_set)
        # Long polls: the scheduler answers at once when the event is set.
        while not is_set:
            is_set = bool(await scheduler.event_wait(name=name, timeout=_EVENT_POLL_S))
    except OSError as exc:
        raise ConnectionError(f"Dask scheduler {address}: {exc}") from exc
    finally:
        scheduler.close_comms()


def fleet_summary(name: str, dask_scheduler: Any = None) -> dict[str, Any] | None:
    """The fleet's controller of `name` on the scheduler this runs on (`Client.run_on_scheduler`
    passes `dask_scheduler`); None when no member ever shared it there."""
    host = dask_scheduler.plugins.get(PLUGIN) if dask_scheduler is not None else None
    return host.summary(name) if host is not None else None


def scheduler_address(share: str) -> str:
    """`dask://HOST:PORT` as distributed writes it (`tcp://HOST:PORT`); `tcp://` and `tls://`
    addresses pass as they are."""
    return "tcp://" + share.removeprefix("dask://") if share.startswith("dask://") else share


class _SchedulerHandler:
    """One handler of one of Assay's scheduler plugins, called over distributed's RPC; the first
    call installs the plugin (`register_scheduler_plugin`, idempotent by name).

    Args:
        address: the scheduler's address (`tcp://127.0.0.1:8786`).
        plugin: makes the plugin, should the scheduler not have it yet.
        handler: the handler's name.
    """

    def __init__(self, address: str, plugin: type[RateShareHost | BudgetHost], handler: str) -> None:
        self.address = address
        self._plugin = plugin
        self._handler = handler
        self._rpc: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._installed = False

    def _scheduler(self) -> Any:
        # Comms belong to the loop that opened them: a new loop (a later run) opens its own.
        loop = asyncio.get_running_loop()
        if self._rpc is None or self._loop is not loop:
            self._rpc = rpc(self.address, timeout=_RPC_TIMEOUT_S)
            self._loop = loop
        return self._rpc

    async def call(self, **arguments: Any) -> dict[str, Any]:
        """The handler's answer. Raises ConnectionError when the scheduler cannot be reached."""
        scheduler = self._scheduler()
        try:
            async with asyncio.timeout(_RPC_TIMEOUT_S):
                if not self._installed:
                    await scheduler.register_scheduler_plugin(
                        plugin=dumps(self._plugin()), name=self._plugin.name, idempotent=True
                    )
                    self._installed = True
                answer = await getattr(scheduler, self._handler)(**arguments)
        except (OSError, TimeoutError) as exc:
            raise ConnectionError(f"Dask scheduler {self.address}: {exc}") from exc
        if not isinstance(answer, dict):  # the plugin went missing (a restarted scheduler)
            self._installed = False
            raise ConnectionError(
                f"Dask scheduler {self.address} answered {answer!r}: the plugin is not installed"
            )
        return answer

    def abort(self) -> None:
        if self._rpc is not None:
            rpc_, self._rpc = self._rpc, None
            rpc_.close_comms()


class DaskLink(_SchedulerHandler):
    """A member's way to the scheduler's rate plugin: `await link(name, report)` -> the grant
    (`assay.calls.fleet.Link`).

    Args:
        address: the scheduler's address (`tcp://127.0.0.1:8786`).
    """

    period_s = SYNC_S

    def __init__(self, address: str) -> None:
        super().__init__(address, RateShareHost, HANDLER)

    async def __call__(self, name: str, report: dict[str, Any]) -> dict[str, Any]:
        return await self.call(name=name, report=report)


class DaskBudgetLink(_SchedulerHandler):
    """A worker's way to the scheduler's budget plugin: `await link(key, report)` -> the run's
    state (`assay.calls.budget_share.BudgetLink`).

    Args:
        address: the scheduler's address.
    """

    def __init__(self, address: str) -> None:
        super().__init__(address, BudgetHost, BUDGET_HANDLER)

    async def __call__(self, key: str, report: dict[str, Any]) -> dict[str, Any]:
        return await self.call(key=key, report=report)
