"""What the test servers share: an aiohttp app served on 127.0.0.1, from its own thread and loop.

The test servers (the mock OpenAI server, the reference harness) are `ServedApp`s: their routes
(`app()`) and state, with `async start(port) -> port` and `async stop()`. `BackgroundServer`
runs one beside synchronous test code (a `Started`: a context manager, as the S3 server and the
Dask cluster are too); control calls (`call`) run on the app's own loop, so they
never race a request.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Coroutine
from typing import Any, Generic, Protocol, Self, TypeVar

from aiohttp import web

T = TypeVar("T")
HOST = "127.0.0.1"
_CONTROL_TIMEOUT_S = 10.0


class Started:
    """A test server that is also a context manager: `start()` on entry, `stop()` on exit."""

    def start(self) -> Self:
        """Start serving; returns self."""
        raise NotImplementedError

    def stop(self) -> None:
        """Stop serving. Does nothing if not running."""
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()


class ServedApp:
    """An aiohttp app's routes and state, started and stopped from inside a running event loop."""

    _runner: web.AppRunner | None = None

    def app(self) -> web.Application:
        """An aiohttp application serving this server's routes."""
        raise NotImplementedError

    async def start(self, port: int = 0) -> int:
        """Start listening on 127.0.0.1.

        Args:
            port: the port to bind; 0 picks a free one.

        Returns:
            The port bound.
        """
        self._runner, bound = await listen(self.app(), HOST, port)
        return bound

    async def stop(self) -> None:
        """Stop listening and close open connections."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


class MockApp(ServedApp):
    """A mock model server: besides its provider's routes, `/_mock/config`, `/_mock/stats` and
    `/_mock/reset` change its settings, read its counters and reset them over HTTP, as
    `configure`, `stats` and `reset` do from Python."""

    def configure(self, **settings: Any) -> dict[str, Any]:
        """Replace the settings given; returns the settings now in force."""
        raise NotImplementedError

    def stats(self) -> dict[str, Any]:
        """Counters since start or the last reset."""
        raise NotImplementedError

    def reset(self) -> None:
        """Zero the counters and restore the settings given at construction."""
        raise NotImplementedError

    def error(self, status: int, message: str) -> web.Response:
        """An error reply in the provider's own shape."""
        raise NotImplementedError

    def add_control_routes(self, app: web.Application) -> None:
        """Serve `/_mock/config`, `/_mock/stats` and `/_mock/reset` on `app`."""
        app.router.add_post("/_mock/config", self._http_configure)
        app.router.add_get("/_mock/stats", self._http_stats)
        app.router.add_post("/_mock/reset", self._http_reset)

    async def _http_configure(self, request: web.Request) -> web.Response:
        try:
            settings = json.loads(await request.read())
            if not isinstance(settings, dict):
                raise TypeError("the config must be a JSON object")
            return json_response(self.configure(**settings))
        except (TypeError, ValueError) as exc:
            return self.error(400, str(exc))

    async def _http_stats(self, request: web.Request) -> web.Response:
        return json_response(self.stats())

    async def _http_reset(self, request: web.Request) -> web.Response:
        self.reset()
        return json_response(self.stats())


def json_response(payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    """`payload` as a compact JSON body (stdlib `json`: the test servers stay lean)."""
    return web.Response(
        body=json.dumps(payload, separators=(",", ":")).encode(),
        status=status,
        content_type="application/json",
        headers=headers,
    )


class ServerApp(Protocol):
    async def start(self, port: int = 0) -> int: ...

    async def stop(self) -> None: ...


App = TypeVar("App", bound=ServerApp)


class BackgroundServer(Started, Generic[App]):
    """`app` served from a daemon thread; a context manager.

    Args:
        app: the server app.
        port: the port to bind on 127.0.0.1; 0 picks a free one.
        name: the thread's name.
    """

    def __init__(self, app: App, *, port: int = 0, name: str = "background-server") -> None:
        self.app = app
        self._requested_port = port
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self.port: int | None = None

    def start(self) -> Self:
        """Start the loop thread and listen; returns self."""
        if self._thread is not None:
            raise RuntimeError(f"{self._name} is already running")
        self._loop = asyncio.new_event_loop()
        # Daemon, so a test that forgets to stop the server cannot keep the interpreter alive.
        self._thread = threading.Thread(target=self._loop.run_forever, name=self._name, daemon=True)
        self._thread.start()
        try:
            self.port = self._run(self.app.start(self._requested_port))
        except BaseException:
            self._halt_loop()
            raise
        return self

    def stop(self) -> None:
        """Stop listening and end the loop thread. Does nothing if not running."""
        if self._thread is None:
            return
        try:
            self._run(self.app.stop())
        finally:
            self._halt_loop()
            self.port = None

    def call(self, fn: Callable[..., T], **kwargs: Any) -> T:
        """Run `fn(**kwargs)` on the app's loop and return its result."""

        async def on_loop() -> T:
            return fn(**kwargs)

        return self._run(on_loop())

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        if self._loop is None:
            coro.close()
            raise RuntimeError(f"{self._name} is not running")
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=_CONTROL_TIMEOUT_S)

    def _halt_loop(self) -> None:
        assert self._loop is not None and self._thread is not None
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()
        self._loop = None
        self._thread = None


async def listen(app: web.Application, host: str, port: int) -> tuple[web.AppRunner, int]:
    """Serve `app` on (host, port); returns the runner (to clean up) and the port bound.

    Handlers whose client went away are cancelled, so an abandoned slow reply does not hold up
    shutdown; no access log, because logging each request halves a test server's throughput.
    Binding the socket ourselves is the public way to learn which port 0 resolved to.
    """
    runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
    await runner.setup()
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        await web.SockSite(runner, sock, backlog=1024).start()
    except BaseException:
        sock.close()
        await runner.cleanup()
        raise
    return runner, sock.getsockname()[1]


Mock = TypeVar("Mock", bound=MockApp)


class MockServer(BackgroundServer[Mock]):
    """A `MockApp` in a background thread with its own event loop; a context manager."""

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:<port>/v1`, the base URL the provider's clients expect."""
        if self.port is None:
            raise RuntimeError("the mock server is not running")
        return f"http://{HOST}:{self.port}/v1"

    def configure(self, **settings: Any) -> dict[str, Any]:
        """Replace the settings given; see the app's `configure`."""
        return self.call(self.app.configure, **settings)

    def stats(self) -> dict[str, Any]:
        """Counters since start or the last reset; see the app's `stats`."""
        return self.call(self.app.stats)

    def reset(self) -> None:
        """Zero the counters and restore the initial settings; see the app's `reset`."""
        self.call(self.app.reset)
