"""`assay ui`: a local Prefect server on 127.0.0.1, the `assay` process work pool, the deployments
of `prefect.yaml` (those new or changed there: `assay.flows.deployments`), and a worker — one
command, in the foreground until Ctrl-C.

Runs from the repository checkout (where `prefect.yaml` is): the deployments run the flows from
that folder. Offline throughout: the server serves its UI from bundled files. What it writes, and
where (it says so as it starts): the runs' store (`--store`, given to the worker as
`ASSAY_STORE`), Prefect's state (`--home`: the server's database, the task cache) and the logs.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from assay.errors import InputError
from assay.flows.deployments import (
    DeployPlan,
    deployments_on_server,
    entry_digests,
    plan_deploys,
    read_record,
    write_record,
)
from assay.store import default_root

POOL = "assay"
BOOT_TIMEOUT_S = 120.0
PORT_RELEASE_S = 5.0  # how long a port still held (its server exiting) is waited for


def _prefect() -> str:
    return str(Path(sys.executable).with_name("prefect"))


def _wait_healthy(server: subprocess.Popen[bytes], api_url: str, log: Path) -> None:
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"prefect server exited ({server.returncode}); see {log}")
        try:
            if httpx.get(f"{api_url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"prefect server did not answer within {BOOT_TIMEOUT_S:g} s; see {log}")


def _check_port_free(port: int) -> None:
    """Refuse a busy port before starting anything: a second server would fail to bind, while the
    health check answered from the first one. A server stopped a moment ago (`assay ui` again
    right after Ctrl-C) can still hold it while it exits: that is waited for, `PORT_RELEASE_S`."""
    deadline = time.monotonic() + PORT_RELEASE_S
    if _port_free(port):
        return
    print(f"waiting for 127.0.0.1:{port} to be released (a server still stopping?) …", flush=True)
    while time.monotonic() < deadline:
        time.sleep(0.2)
        if _port_free(port):
            return
    raise InputError(
        f"--port {port}: 127.0.0.1:{port} is already in use (another `assay ui` or Prefect server?); "
        "stop it, or pass another --port"
    )


def _port_free(port: int) -> bool:
    """Whether the server could bind 127.0.0.1:`port` now. Bound as uvicorn binds, with
    SO_REUSEADDR: the last server's connections left in TIME_WAIT do not hold the port for it."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def deploy_changed(api_url: str, env: dict[str, str], home: Path) -> DeployPlan:
    """Deploy, in the `assay` work pool, the deployments of prefect.yaml (in the current folder)
    that the server lacks or whose entry changed since they were deployed; the others keep what
    the UI changed in them (`assay.flows.deployments`). Returns what it did.

    Args:
        api_url: the server's API.
        env: the environment `prefect deploy` runs in (its `PREFECT_API_URL`, `PREFECT_HOME`).
        home: Prefect's home, where what was deployed is remembered.
    """
    digests = entry_digests(Path("prefect.yaml"))
    recorded = read_record(home)
    plan = plan_deploys(digests, recorded, deployments_on_server(api_url))
    if plan.to_deploy:
        # An existing pool is fine: `create` then fails harmlessly and deploy reuses it.
        subprocess.run(
            [_prefect(), "work-pool", "create", POOL, "--type", "process"],
            env=env,
            capture_output=True,
            check=False,
        )
        names = [option for name in plan.to_deploy for option in ("--name", name)]
        deployed = subprocess.run(
            [_prefect(), "--no-prompt", "deploy", *names],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if deployed.returncode != 0:
            raise RuntimeError(f"prefect deploy failed:\n{deployed.stdout[-2000:]}{deployed.stderr[-2000:]}")
    write_record(home, recorded, {name: digests[name] for name in plan.to_deploy})
    return plan


def _stop(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _places(home: Path | None, log_dir: Path, store: str | None) -> tuple[Path, Path, str]:
    """Where Prefect's state, the logs and the runs' store go, as absolute paths (a store URL as is).

    Args:
        home: `--home`; default `PREFECT_HOME`, else Prefect's own `~/.prefect`.
        log_dir: `--logs`.
        store: `--store`; default `ASSAY_STORE`, else `./assay-store`.
    """
    home = home or Path(os.environ.get("PREFECT_HOME") or Path.home() / ".prefect")
    store = store or default_root()
    if "://" not in store:
        store = str(Path(store).expanduser().resolve())
    return home.expanduser().resolve(), log_dir.expanduser().resolve(), store


def serve(*, port: int, home: Path | None, log_dir: Path, store: str | None = None) -> int:
    """Start the server and a worker, deploy what prefect.yaml adds or changes, and wait until
    interrupted.

    Args:
        port: the server's port on 127.0.0.1.
        home: PREFECT_HOME for the server and worker (default: `PREFECT_HOME`, else Prefect's own).
        log_dir: where the server's and worker's output go.
        store: the store of deployment runs that name none (default `ASSAY_STORE`, else
            `./assay-store` in the checkout).
    """
    if not Path("prefect.yaml").is_file():
        raise InputError("run `assay ui` from the Assay checkout: no prefect.yaml in the current folder")
    _check_port_free(port)
    home, log_dir, store = _places(home, log_dir, store)
    print(
        f"starting: a Prefect server on 127.0.0.1:{port} · store {store} · Prefect state {home} · "
        f"logs {log_dir}/ …",
        flush=True,
    )
    api_url = f"http://127.0.0.1:{port}/api"
    env = {**os.environ, "PREFECT_API_URL": api_url, "DO_NOT_TRACK": "1"}
    env.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    env["PREFECT_HOME"] = str(home)
    # The worker's flow runs use it when their `store` parameter is empty.
    env["ASSAY_STORE"] = store
    log_dir.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, _stop)  # `kill` stops the server and worker too, not only Ctrl-C
    server_log, worker_log = log_dir / "prefect-server.log", log_dir / "prefect-worker.log"
    processes: list[subprocess.Popen[bytes]] = []
    try:
        with server_log.open("ab") as out:
            processes.append(
                subprocess.Popen(
                    [_prefect(), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        _wait_healthy(processes[0], api_url, server_log)
        print("server answers; deploying what prefect.yaml adds or changes …", flush=True)
        deploys = deploy_changed(api_url, env, home)
        with worker_log.open("ab") as out:
            processes.append(
                subprocess.Popen(
                    [_prefect(), "worker", "start", "--pool", POOL],
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
        print(
            f"ready: Prefect UI at http://127.0.0.1:{port} · API {api_url} · worker on pool {POOL!r}\n"
            f"{deploys.line()}\n"
            f"store: {store} (runs that name no store) · Prefect state: {home}\n"
            f"logs: {server_log}, {worker_log} · Ctrl-C stops everything",
            flush=True,
        )
        while all(p.poll() is None for p in processes):
            time.sleep(0.5)
        ended = next(p for p in processes if p.poll() is not None)
        which = "server" if ended is processes[0] else "worker"
        print(
            f"error: the Prefect {which} exited ({ended.returncode}); see {server_log if which == 'server' else worker_log}",
            file=sys.stderr,
        )
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        for process in reversed(processes):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
