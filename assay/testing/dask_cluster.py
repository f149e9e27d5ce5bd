"""A real Dask cluster on 127.0.0.1 for tests and benchmarks: `dask scheduler` and `dask worker`
processes, as a user starts them.

    with DaskCluster(workers=2, env=s3.env) as cluster:
        cluster.address               # tcp://127.0.0.1:<port>
        cluster.workers[0].pid        # a worker process (no nanny: a killed worker stays dead)

Each worker is a process of its own with one thread (`--nthreads 1`) and no nanny, so a test can
SIGKILL one and see its shards run elsewhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Self

from assay.testing._background import Started


def _dask(*args: str) -> list[str]:
    return [str(Path(sys.executable).parent / "dask"), *args]


class DaskCluster(Started):
    """A scheduler and `workers` worker processes, started in the background.

    Args:
        workers: how many worker processes.
        env: variables over this process's environment for every process (S3 credentials, say).
        worker_env: variables for the first worker only (fault injection).
        memory_limit: each worker's memory limit (Dask's own spilling and pausing), e.g. "1GB".
        preload: modules each worker imports as it starts (`dask worker --preload`), so that the
            first task does not pay for them.
    """

    def __init__(
        self,
        workers: int = 2,
        env: dict[str, str] | None = None,
        worker_env: dict[str, str] | None = None,
        memory_limit: str = "0",
        preload: tuple[str, ...] = (),
    ) -> None:
        self._n = workers
        self._env = {**os.environ, **(env or {})}
        self._first_env = worker_env or {}
        self._memory_limit = memory_limit
        self._preload = [arg for module in preload for arg in ("--preload", module)]
        self._folder = tempfile.TemporaryDirectory(prefix="assay-dask-")
        self.address = ""
        self.scheduler: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []

    def start(self, timeout: float = 120) -> Self:
        folder = Path(self._folder.name)
        scheduler_file = folder / "scheduler.json"
        self.scheduler = subprocess.Popen(
            _dask(
                "scheduler",
                "--host",
                "127.0.0.1",
                "--port",
                "0",
                "--no-dashboard",
                "--scheduler-file",
                str(scheduler_file),
            ),
            env=self._env,
            stdout=subprocess.DEVNULL,
            stderr=(folder / "scheduler.log").open("wb"),
        )
        self.address = _wait_for_address(scheduler_file, self.scheduler, timeout)
        for n in range(self._n):
            self.add_worker(env=self._first_env if n == 0 else None)
        self.wait_for_workers(self._n, timeout)
        return self

    def add_worker(self, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        """Start one more worker process (one thread, no nanny)."""
        n = len(self.workers)
        worker = subprocess.Popen(
            _dask(
                "worker",
                self.address,
                "--nthreads",
                "1",
                "--no-nanny",
                "--no-dashboard",
                "--name",
                f"w{n}",
                "--memory-limit",
                self._memory_limit,
                *self._preload,
                "--local-directory",
                str(Path(self._folder.name) / f"w{n}"),
            ),
            env={**self._env, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=(Path(self._folder.name) / f"worker-{n}.log").open("wb"),
        )
        self.workers.append(worker)
        return worker

    def wait_for_workers(self, n: int, timeout: float = 120) -> None:
        """Until `n` workers are connected to the scheduler."""
        from distributed import Client

        with Client(self.address, timeout=timeout, set_as_default=False) as client:
            client.wait_for_workers(n, timeout=timeout)

    def log(self, name: str) -> str:
        """A process's log: `scheduler` or `worker-<n>`."""
        return (Path(self._folder.name) / f"{name}.log").read_text(errors="replace")

    def stop(self) -> None:
        for process in [*self.workers, self.scheduler]:
            if process is not None and process.poll() is None:
                process.terminate()
        for process in [*self.workers, self.scheduler]:
            if process is not None:
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self._folder.cleanup()


def _wait_for_address(scheduler_file: Path, scheduler: subprocess.Popen[bytes], timeout: float) -> str:
    """The scheduler's address, once it wrote its scheduler file."""
    import json

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if scheduler.poll() is not None:
            raise RuntimeError(f"dask scheduler exited with {scheduler.returncode}")
        try:
            return json.loads(scheduler_file.read_text())["address"]
        except (FileNotFoundError, ValueError, KeyError):
            time.sleep(0.05)  # polling the file the scheduler writes when it listens
    raise TimeoutError(f"dask scheduler did not start within {timeout:g} s")
