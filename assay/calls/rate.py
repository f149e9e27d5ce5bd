"""Adaptive rate control: one controller per (endpoint, model), shared by every run that calls it
— in this process, or by a fleet of processes (docs/rate-control.md).

`controller_for` gives it, from the backend `ASSAY_RATE_SHARE` (or `use_share`) names: `local`,
a `assay.calls.aimd.RateController` per process; `dask://HOST:PORT`, this process's member of
the window a Dask scheduler holds (`assay.calls.fleet`, `assay.calls.fleet_dask`); `prefect`,
its member of the window the Prefect server at `PREFECT_API_URL` holds as a global concurrency
limit (`assay.calls.fleet_prefect`). Code in a task on a Dask worker shares through the worker's
scheduler unless told otherwise.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

from assay.calls.aimd import RateController
from assay.calls.endpoint import ModelEndpoint
from assay.settings import env_name, settings

SHARE_ENV = env_name("rate_share")
_default_share: str | None = None
_controllers: dict[tuple[str, int], RateController] = {}


def use_share(share: str | None) -> None:
    """Share the controllers made from now on through `share` unless `ASSAY_RATE_SHARE` says
    otherwise (`--dask ADDRESS` passes `dask://ADDRESS`, so a run's workers share one window).

    Args:
        share: `local`, `dask://HOST:PORT` (or a `tcp://` / `tls://` scheduler address),
            `prefect`; None for the default (`local`).
    """
    global _default_share
    _default_share = check_share(share) if share is not None else None


def check_share(share: str) -> str:
    """`share` if it names a backend, else a ValueError naming the setting."""
    if share == "local" or (
        share.startswith(("dask://", "tcp://", "tls://")) and ":" in share.split("//", 1)[1]
    ):
        return share
    if share == "prefect":
        from prefect.settings import PREFECT_API_URL

        # Without a server, Prefect starts one per process: nothing would be shared.
        if not PREFECT_API_URL.value():
            raise ValueError(f"{SHARE_ENV}=prefect needs a Prefect server: set PREFECT_API_URL")
        return share
    raise ValueError(
        f"{SHARE_ENV} must be `local`, a Dask scheduler address (`dask://HOST:PORT`) or `prefect`, "
        f"got {share!r}"
    )


def current_share() -> str:
    """The backend the controllers are shared through: `ASSAY_RATE_SHARE`, else what
    `use_share` set, else — in a task on a Dask worker — the worker's own scheduler, else
    `local`. Raises ValueError when the setting is not a backend."""
    return check_share(settings().rate_share or _default_share or worker_scheduler() or "local")


def worker_scheduler() -> str | None:
    """The scheduler of the Dask worker running this code, if it runs in one: the shards of a
    `--dask` run share their window (and their run's budget) through it without being told."""
    if "distributed" not in sys.modules:  # not on a worker; and no Dask import on the plain path
        return None
    from distributed import get_worker

    try:
        return str(get_worker().scheduler.address)
    except ValueError:  # not in a worker's task
        return None


def controller_for(
    endpoint: ModelEndpoint, model: str, ceiling: int, *, opens_run: bool = True
) -> RateController:
    """The controller of (endpoint, model), made on first use, from the backend `current_share`
    names: the process's own (`local`), or this process's member of the fleet's (a Dask
    scheduler's or a Prefect server's: `assay.calls.fleet`). A later run asking a higher ceiling raises it (each run's
    items stay within its own `concurrency` too); the lowest `rpm` / `tpm` given wins.

    Args:
        endpoint: the endpoint spec (a target's, a judge's), with its `rate_limits`, if any.
        model: the model called there.
        ceiling: the run's `concurrency`.
        opens_run: a run's target opens it, and the counts it stores start afresh; False for a
            caller that joins a run under way (a judge's client, made at its first score).
    """
    name = _window(endpoint.base_url, model)
    limits = endpoint.rate_limits
    rpm, tpm = (limits.rpm, limits.tpm) if limits is not None else (None, None)
    share = current_share()
    # A fleet member belongs to one event loop: threads running their own loops (a Dask worker's
    # tasks) are separate members. In-process, the process's runs share one controller.
    key = (name, 0 if share == "local" else threading.get_ident())
    controller = _controllers.get(key)
    if controller is None or controller.share_url != share:
        controller = _controllers[key] = _make(name, ceiling, share, rpm=rpm, tpm=tpm)
    else:
        if opens_run:
            controller.new_episode()
        controller.ceiling = max(controller.ceiling, ceiling)
        if rpm is not None:
            controller.rpm = min(controller.rpm or rpm, rpm)
        if tpm is not None:
            controller.tpm = min(controller.tpm or tpm, tpm)
    return controller


def _make(name: str, ceiling: int, share: str, *, rpm: float | None, tpm: float | None) -> RateController:
    if share == "local":
        return RateController(name, ceiling, rpm=rpm, tpm=tpm)
    # Imported here: the plain path imports no Dask.
    from assay.calls.fleet import Link, SharedRateController

    link: Link
    if share == "prefect":
        from assay.calls.fleet_prefect import PrefectLink

        link, backend = PrefectLink(), "prefect"
    else:
        from assay.calls.fleet_dask import DaskLink, scheduler_address

        link, backend = DaskLink(scheduler_address(share)), "dask"
    controller = SharedRateController(name, ceiling, sync=link, share=backend, rpm=rpm, tpm=tpm)
    controller.share_url = share
    return controller


def _window(base_url: str, model: str) -> str:
    return f"{base_url} {model}"


def window_name(target: Any) -> str | None:
    """The name of the controller a target spec calls through (`<base_url> <model>`), if any."""
    if isinstance(target, ModelEndpoint) and getattr(target, "model", None):
        return _window(target.base_url, target.model)  # type: ignore[attr-defined]
    return None


def rate_history(target: Any) -> dict[str, Any] | None:
    """The state and history of the controller a run's target spec calls through, if any (what
    is stored with the run as `rate_control`)."""
    name = window_name(target)
    if name is None:
        return None
    # This thread's controller, else another thread's (a flow whose tasks ran on other threads).
    named = {key: c for key, c in _controllers.items() if key[0] == name}
    found = [c for (_, thread), c in named.items() if thread in (0, threading.get_ident())]
    found = found or list(named.values())
    return found[-1].summary() if found else None
