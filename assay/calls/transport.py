"""The HTTP library under Assay's model clients (`assay.calls.chat`, `assay.calls.batch`): pyreqwest.

pyreqwest is reqwest (Rust) behind an asyncio API: the HTTP work of a call — the pooled
connection, writing the request, parsing the reply — runs on its own thread, outside the GIL. The
event loop's thread, which bounds a run's throughput, spends a quarter of what it did on aiohttp
(`benchmarks/throughput.py`, docs/performance.md). This module opens its clients
with Assay's settings and turns its errors into the standard library's, which `assay.calls.http`
reads (`is_timeout`, `refused`): nothing of pyreqwest reaches a caller.

    open_client(...)        a client: pool width, default headers, timeouts, no redirects, certificates
    standard_error(exc)     TimeoutError | ConnectionRefusedError | ConnectionError, pyreqwest's as cause
    reason(status)          the status's reason phrase (pyreqwest gives none)
    multipart(fields, ...)  a multipart form: text fields, and bytes as a file
    parsed_url(url)         a URL parsed once, for a client that sends many requests to it
    Transport               a stand-in for the network: a handler that answers each request itself
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Awaitable, Callable
from datetime import timedelta
from http import HTTPStatus
from typing import Any

from pyreqwest.client import Client, ClientBuilder
from pyreqwest.exceptions import RequestError
from pyreqwest.middleware import Next
from pyreqwest.request import Request
from pyreqwest.response import Response

__all__ = [
    "Client",
    "RequestError",
    "Transport",
    "multipart",
    "open_client",
    "parsed_url",
    "reason",
    "standard_error",
]

Transport = Callable[[Request], Awaitable[Response]]
"""Answers a client's every request in place of the network, as `httpx.MockTransport` does: a
reply built with pyreqwest's `ResponseBuilder`, or a raised `RequestError` for a request that got
none. The client's own work (headers, body, reading the reply) runs as it does against a server;
only the socket is left out. Tests stand it in for a server when they test `assay.calls.http`'s
behaviour (retries, waits, failures' words) without one."""


def open_client(
    url: str,
    *,
    headers: dict[str, str],
    timeout: float,
    connections: int | None = None,
    transport: Transport | None = None,
) -> Client:
    """A client for one endpoint.

    Args:
        url: the endpoint (its scheme decides whether certificates are loaded).
        headers: sent with every request (the API key among them: never logged).
        timeout: seconds to connect, to wait for a pooled connection and between reads — as
            httpx's `Timeout(t)`; no limit on a whole reply, which a slow but live model may take
            long to send.
        connections: requests in flight at once (None: no limit).
        transport: what answers the requests instead of the network (tests), if not None.
    """
    span = timedelta(seconds=timeout)
    builder = (
        ClientBuilder()
        .max_connections(connections)
        .default_headers(headers)
        .connect_timeout(span)
        .pool_timeout(span)
        .read_timeout(span)
        .follow_redirects(False)
    )
    if url.startswith("https:"):
        for pem in _certificates():
            with contextlib.suppress(Exception):  # a file of SSL_CERT_DIR that is not a certificate
                builder = builder.add_root_certificate_pem(pem)
    if transport is not None:
        builder = builder.with_middleware(_answered_by(transport))
    return builder.build()


def _answered_by(transport: Transport) -> Callable[[Request, Next], Awaitable[Response]]:
    """A pyreqwest middleware that hands each request to `transport` and never sends it on."""

    async def answer(request: Request, _next: Next) -> Response:
        return await transport(request)

    return answer


def standard_error(exc: RequestError) -> OSError:
    """pyreqwest's error as the standard library's: a timeout, a refused connection (never sent),
    or any other connection error, said in reqwest's innermost words ("connection closed before
    message completed"). A reply whose body broke off is a connection error too."""
    details = getattr(exc, "details", None) or {}
    causes = [str(cause.get("message", "")) for cause in details.get("causes") or ()]
    said = causes[-1] if causes else str(exc)
    if isinstance(exc, TimeoutError):
        error: OSError = TimeoutError(said)
    elif any(f"os error {errno.ECONNREFUSED})" in cause for cause in causes):
        error = ConnectionRefusedError(errno.ECONNREFUSED, said)
    else:
        error = ConnectionError(said)
    error.__cause__ = exc
    return error


def parsed_url(url: str) -> Any:
    """`url` as pyreqwest's `Url`: a request given it skips parsing the string again."""
    from pyreqwest.http import Url

    return Url(url)


def reason(status: int) -> str | None:
    """The status's reason phrase (`Too Many Requests`), for an error reply whose body says nothing."""
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return None


def multipart(fields: dict[str, str | bytes], *, filename: str, mime: str) -> Any:
    """A multipart form (a request's `.multipart(...)`): text fields, and bytes as a file.

    Args:
        fields: the form's fields, by name.
        filename: the file name of a bytes field.
        mime: its content type.
    """
    from pyreqwest.multipart import FormBuilder, PartBuilder

    form = FormBuilder()
    for name, value in fields.items():
        if isinstance(value, bytes):
            form = form.part(name, PartBuilder.from_bytes(value).file_name(filename).mime(mime))
        else:
            form = form.text(name, value)
    return form


def _certificates() -> list[bytes]:
    """The PEM bundles httpx trusted — `SSL_CERT_FILE` (else certifi's) and the files of
    `SSL_CERT_DIR` — added to the system's, so that leaving httpx changes no host a user reaches."""
    import certifi

    files = [os.environ.get("SSL_CERT_FILE") or certifi.where()]
    folder = os.environ.get("SSL_CERT_DIR")
    if folder and os.path.isdir(folder):
        files += [os.path.join(folder, name) for name in sorted(os.listdir(folder))]
    bundles = []
    for path in files:
        with contextlib.suppress(OSError), open(path, "rb") as handle:
            bundles.append(handle.read())
    return bundles
