"""What the uvicorn (FastAPI) test servers share: the app served on 127.0.0.1 from a daemon thread,
with the `[standard]` loop and parser (httptools, uvloop) vLLM and LiteLLM run on. FastAPI and
uvicorn are the `dev` extra's: only tests import this."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any, Self

import uvicorn

from assay.testing._background import HOST, Started

_START_TIMEOUT_S = 10.0


class UvicornThread(Started):
    """A server whose `app()` uvicorn serves in a daemon thread on a free port; a context manager."""

    thread_name = "uvicorn-server"
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None
    port: int | None = None

    def app(self) -> Any:
        """The ASGI application served."""
        raise NotImplementedError

    def start(self) -> Self:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((HOST, 0))
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app(),
            loop="uvloop",
            http="httptools",
            lifespan="off",
            log_level="critical",
            access_log=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [sock]}, name=self.thread_name, daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + _START_TIMEOUT_S
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"{type(self).__name__} did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is None or self._thread is None:
            return
        self._server.should_exit = True
        self._thread.join(_START_TIMEOUT_S)
        self._server = self._thread = None
        self.port = None
