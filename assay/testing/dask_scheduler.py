"""A real `dask scheduler` process on 127.0.0.1, for the tests and benchmarks that share rate
controllers through one (`assay/calls/fleet_dask.py`)."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BOOT_TIMEOUT_S = 60.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def dask_scheduler(folder: Path) -> Iterator[str]:
    """Start `dask scheduler` on a free port of 127.0.0.1 (its log in `folder/scheduler.log`);
    yield its address once it listens; stop it after.

    Args:
        folder: where its log goes.
    """
    port = _free_port()
    log = folder / "scheduler.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1"]
            + ["--port", str(port), "--no-dashboard"],
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + BOOT_TIMEOUT_S
        # Ready when it says so in its log (it listens before it writes this line).
        while b"Scheduler at:" not in log.read_bytes():
            if process.poll() is not None:
                raise RuntimeError(f"dask scheduler exited: {log.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"no dask scheduler within {BOOT_TIMEOUT_S} s: {log.read_text()[-2000:]}")
            time.sleep(0.05)
        yield f"tcp://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
