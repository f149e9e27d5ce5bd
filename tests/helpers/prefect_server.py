"""A real `prefect server start` for tests, isolated from the machine's Prefect setup.

Not a test module: test modules that need a Prefect API start one with `serving_prefect(home)` (or
`prefect_server(home)` for its URL alone) and give their subprocesses its `env`
(`prefect_env(home, api_url)`). Booting takes ~10 s, so a module should start one server and
share it (a module-scoped fixture).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from tests.conftest import REPO

ASSAY = str(Path(sys.executable).with_name("assay"))
# Generous: on a machine shared by several test runs a boot has taken over 90 s.
BOOT_TIMEOUT_S = 180.0
# Long enough for uvicorn and the server's services to shut down cleanly; then SIGKILL.
STOP_TIMEOUT_S = 15.0
_LOG_NAME = "server.log"
_LOG_TAIL_CHARS = 4000
# The answers Prefect's own client retries (PrefectHttpxAsyncClient): SQLite's "database is
# locked" comes back as 503 while the server's services write, and a test's bare request must
# ride it out as the UI and the CLI do.
_RETRIED_STATUSES = frozenset({429, 502, 503})
_RETRIES = 6
_FIRST_BACKOFF_S = 0.5


def _prefect_executable() -> str:
    """The `prefect` next to this interpreter, so the server runs the venv's Prefect."""
    return str(Path(sys.executable).with_name("prefect"))


def _free_port() -> int:
    """A port free at the time of asking (the OS picks it; the server binds it a moment later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def prefect_env(home: Path, api_url: str | None = None) -> dict[str, str]:
    """os.environ without its own PREFECT_* settings, plus the variables that isolate a test.

    Inherited PREFECT_* variables are dropped because a developer's PREFECT_API_URL, PREFECT_PROFILE
    or PREFECT_API_KEY would otherwise point the test at their own server or account.

    Args:
        home: PREFECT_HOME: holds the profiles, the server's SQLite database and the task
            result cache, so runs sharing a home share a cache.
        api_url: the server's API URL, for clients; None for the server itself.
    """
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(
        PREFECT_HOME=str(home),
        DO_NOT_TRACK="1",
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        # The UI is not needed by tests; skipping it skips building its static files at boot.
        PREFECT_SERVER_UI_ENABLED="false",
        PREFECT_LOGGING_LEVEL="WARNING",
        # Logs shipped to the API add load on the SQLite server and nothing a test reads.
        PREFECT_LOGGING_TO_API_ENABLED="false",
        # "database is locked" 503s are retried by the client; show them in the server log.
        PREFECT_SERVER_LOG_RETRYABLE_ERRORS="true",
    )
    if api_url is not None:
        env["PREFECT_API_URL"] = api_url
    return env


class _RetryingTransport(httpx.HTTPTransport):
    """HTTP that sends a request again, with a doubling pause, while the server answers one of
    `_RETRIED_STATUSES`; the last answer is returned whatever it is."""

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        pause = _FIRST_BACKOFF_S
        for _ in range(_RETRIES):
            response = super().handle_request(request)
            if response.status_code not in _RETRIED_STATUSES:
                return response
            response.close()
            time.sleep(pause)
            pause *= 2
        return super().handle_request(request)


# The tests' own requests to a server's REST API (as the Prefect UI makes them), retried as
# Prefect's client retries; bodies are bytes, so a request can be sent again as it is.
prefect_http = httpx.Client(transport=_RetryingTransport(), timeout=30.0)


def _log_tail(log: Path) -> str:
    text = log.read_text(errors="replace") if log.is_file() else ""
    return text[-_LOG_TAIL_CHARS:] or "(no output)"


def _wait_healthy(process: subprocess.Popen[bytes], base_url: str, log: Path) -> None:
    """Return once GET /api/health answers 200; raise with the server's output otherwise."""
    deadline = time.monotonic() + BOOT_TIMEOUT_S
    with httpx.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise RuntimeError(
                    f"prefect server exited with status {process.returncode} before answering "
                    f"{base_url}/api/health. Its output:\n{_log_tail(log)}"
                )
            try:
                if client.get(f"{base_url}/api/health").status_code == 200:
                    return
            except httpx.TransportError:
                pass  # not listening yet
            time.sleep(0.25)
    raise RuntimeError(
        f"prefect server did not answer {base_url}/api/health within {BOOT_TIMEOUT_S:.0f} s. "
        f"Its output:\n{_log_tail(log)}"
    )


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM the server's process group; SIGKILL what is left of it after a grace period."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        process.wait(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pass
    # The leader if it hung in shutdown, or any child it left behind.
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


@contextmanager
def prefect_server(home: Path) -> Iterator[str]:
    """Run `prefect server start` on a free port of 127.0.0.1; yield its API URL.

    The server's output goes to `<home>/server.log` (a file, so a chatty server never blocks on
    a full pipe) and is quoted in the error if it fails to boot.

    Args:
        home: its PREFECT_HOME, created if missing; pass the same to `prefect_env`.
    """
    home.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    log = home / _LOG_NAME
    with log.open("wb") as output:
        process = subprocess.Popen(
            [_prefect_executable(), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
            env=prefect_env(home),
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            # Its own process group, so stopping it reaches any child it spawns.
            start_new_session=True,
        )
    try:
        _wait_healthy(process, base_url, log)
        yield f"{base_url}/api"
    finally:
        _stop(process)


@dataclass(frozen=True)
class PrefectAPI:
    """A running server: its PREFECT_HOME, its API URL and the environment that points a
    subprocess at it (`prefect_env`)."""

    home: Path
    url: str
    env: dict[str, str]

    def assay(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """The `assay` CLI from the repo root against this server, its output captured.

        Not conftest's `run_assay`: it lays its env over os.environ, which would bring back the
        PREFECT_* settings `prefect_env` removes."""
        done = subprocess.run(
            [ASSAY, *args],
            check=False,  # the tests assert on the exit status themselves
            cwd=REPO,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        # Shown by pytest only when a test fails: the CLI's stderr holds Prefect's warnings.
        print(f"$ assay {' '.join(args)} -> {done.returncode}\n{done.stderr}", file=sys.stderr)
        return done


@contextmanager
def serving_prefect(home: Path) -> Iterator[PrefectAPI]:
    """`prefect_server(home)`, yielded as a `PrefectAPI`.

    Args:
        home: its PREFECT_HOME (see `prefect_server`).
    """
    with prefect_server(home) as url:
        yield PrefectAPI(home=home, url=url, env=prefect_env(home, url))
