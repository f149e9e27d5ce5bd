"""The egress allowlist proxy: the program that runs inside the egress sidecar (docs/egress.md).

Standard library only, and Python 3.9 or later, since it runs on whatever python3 the proxy
image has. It serves two kinds of proxy request and nothing else:

- `CONNECT host:port` (HTTPS and any other TCP): a tunnel, once the host is allowed;
- absolute-URI plain HTTP (`GET http://host[:port]/path`): forwarded with `Connection: close`.

The allowlist is a JSON list of host patterns, from argv[1] or the `ASSAY_EGRESS_ALLOWLIST`
environment variable: an exact host (`api.example.com`), a subdomain wildcard (`*.example.com`,
which does not match `example.com` itself), or an exact IP literal. An IP target is refused unless
listed exactly, so a wildcard can never open an address range. An entry may end in `:port`
(`api.example.com:443`), and then allows that port only; without one, any port.

Every decision is one JSON line on stdout, `{"type": "egress", "host": ..., "decision":
"allowed" | "denied" | "failed", "reason": ...}`. Only the host is ever written: never the
path, the query, a header or a body, since those may carry secrets. A denied request gets 403.
The first line is `{"type": "listening", "port": N}` once the socket is bound.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import re
import sys
from urllib.parse import urlsplit

PORT = 3128
ALLOWLIST_ENV = "ASSAY_EGRESS_ALLOWLIST"
PORT_ENV = "ASSAY_EGRESS_PORT"
BIND_ENV = "ASSAY_EGRESS_BIND"  # 0.0.0.0 in the sidecar; tests on the host bind 127.0.0.1

_HOSTNAME = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*")
_MAX_HEAD = 64 * 1024
# Before 3.11, asyncio's timeout is not the builtin one; the sidecar's python may be older.
_TIMEOUT = asyncio.TimeoutError
_HEAD_TIMEOUT_S = 30.0
_CONNECT_TIMEOUT_S = 15.0
_MAX_CONNECTIONS = 256
_CHUNK = 64 * 1024
# Hop-by-hop and proxy headers stay with the proxy; `Connection: close` is set instead, so one
# client connection carries one request and each request is checked on its own.
_DROPPED_HEADERS = {
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"proxy-authorization",
    b"te",
    b"upgrade",
}


class Refused(Exception):
    """A request the proxy will not carry. `host` is a checked hostname or "invalid-host"."""

    def __init__(self, host: str, reason: str, status: int = 403) -> None:
        super().__init__(reason)
        self.host, self.reason, self.status = host, reason, status


# -- pure functions (unit-tested on the host) ---------------------------------------------------


def normalize_host(raw: str) -> str | None:
    """The canonical form of a target host (lower case, no trailing dot, IPv6 without brackets),
    or None when it is neither a hostname nor an IP literal.

    Args:
        raw: the host as the request gave it.
    """
    host = raw.strip().lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    host = host.removesuffix(".")
    if len(host) > 253 or not _HOSTNAME.fullmatch(host):
        return None
    return host


def is_ip(host: str) -> bool:
    """Whether a normalized host is an IP literal."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        return False


def split_pattern(pattern: str) -> tuple[str, int | None]:
    """An allowlist entry into its host part and its port (None: any port).

    `host`, `*.suffix`, `host:443`, `*.suffix:443`, an IP literal, `[v6]` or `[v6]:443`; a bare
    IPv6 literal (several colons) has no port.

    Raises:
        ValueError: a port that is not a number from 1 to 65535.
    """
    pattern = pattern.strip()
    if pattern.startswith("[") and "]:" in pattern:
        host, port_text = pattern.rsplit(":", 1)
    elif pattern.count(":") == 1:
        host, port_text = pattern.split(":")
    else:
        return pattern, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"bad port in {pattern!r}")
    return host, int(port_text)


def host_allowed(host: str, allowlist: list[str], port: int | None = None) -> tuple[bool, str]:
    """Whether the allowlist lets `host` (on `port`) through, and why (a short reason code).

    Args:
        host: a host as the request gave it (normalized here).
        allowlist: patterns: exact hosts, `*.suffix` wildcards, exact IP literals, each with an
            optional `:port` that then is the only port allowed.
        port: the port asked for; None matches port-less patterns only.
    """
    target = normalize_host(host)
    if target is None:
        return False, "invalid-host"
    for entry in allowlist:
        try:
            pattern, only_port = split_pattern(entry.lower())
        except ValueError:
            continue
        if only_port is not None and only_port != port:
            continue
        if pattern.startswith("*."):
            suffix = normalize_host(pattern[2:])
            # A wildcard names hostnames only: an IP target must be listed exactly.
            if suffix and not is_ip(target) and target.endswith("." + suffix):
                return True, "allowlisted"
        elif normalize_host(pattern) == target:
            return True, "allowlisted"
    return False, "ip-not-allowlisted" if is_ip(target) else "not-allowlisted"


def split_authority(authority: str) -> tuple[str, int]:
    """`host:port` (or `[v6]:port`) of a CONNECT request into host and port.

    Raises:
        ValueError: no port, a bad port, or an empty host.
    """
    if authority.startswith("["):
        host, _, rest = authority[1:].partition("]")
        if not rest.startswith(":"):
            raise ValueError("no port")
        port_text = rest[1:]
    else:
        host, _, port_text = authority.rpartition(":")
    if not host or not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError("bad authority")
    return host, int(port_text)


def _loggable(host: str) -> str:
    """The host as it may be written down: normalized, or "invalid-host"."""
    return normalize_host(host) or "invalid-host"


# -- the server ----------------------------------------------------------------------------------


def _log(event: dict) -> None:
    print(json.dumps(event, separators=(",", ":")), flush=True)


def _decide(host: str, port: int, allowlist: list[str]) -> str:
    """Logs the decision for `host`; returns its normalized form when allowed, raises otherwise."""
    allowed, reason = host_allowed(host, allowlist, port)
    name = _loggable(host)
    if not allowed:
        raise Refused(name, reason)
    _log({"type": "egress", "host": name, "decision": "allowed", "reason": reason})
    return name


def _parse_target(head: bytes, allowlist: list[str]) -> tuple[bool, str, int, bytes]:
    """Reads the request head: (is CONNECT, host, port, the head to send upstream, if any)."""
    request_line, _, rest = head.partition(b"\r\n")
    parts = request_line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        raise Refused("invalid-host", "malformed-request", 400)
    method, target, version = (p.decode("latin-1") for p in parts)
    if method == "CONNECT":
        try:
            host, port = split_authority(target)
        except ValueError:
            raise Refused("invalid-host", "malformed-request", 400) from None
        return True, _decide(host, port, allowlist), port, b""
    if not target.lower().startswith("http://"):
        # Origin-form (not a proxy request) or another scheme: nothing to forward.
        raise Refused("invalid-host", "unsupported-request", 400)
    try:
        url = urlsplit(target)
        host, port = url.hostname or "", url.port or 80
    except ValueError:
        raise Refused("invalid-host", "malformed-request", 400) from None
    if not host:
        raise Refused("invalid-host", "malformed-request", 400)
    name = _decide(host, port, allowlist)
    path = (url.path or "/") + (f"?{url.query}" if url.query else "")
    lines = [f"{method} {path} {version}".encode("latin-1")]
    for line in rest.split(b"\r\n"):
        if not line:
            continue
        key = line.split(b":", 1)[0].strip().lower()
        # The client's own Host could name another site on the allowed host's address: the Host
        # sent is always the allowed one's. Proxy-* headers are for this proxy, never forwarded.
        if key in _DROPPED_HEADERS or key == b"host" or key.startswith(b"proxy-"):
            continue
        lines.append(line)
    lines.append(b"Host: " + url.netloc.rpartition("@")[2].encode("latin-1"))
    lines.append(b"Connection: close")
    return False, name, port, b"\r\n".join(lines) + b"\r\n\r\n"


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def _relay(
    client: tuple[asyncio.StreamReader, asyncio.StreamWriter],
    upstream: tuple[asyncio.StreamReader, asyncio.StreamWriter],
) -> None:
    """Copies both ways until the upstream side is done; a client half-close is passed on."""
    up = asyncio.ensure_future(_pipe(client[0], upstream[1]))
    down = asyncio.ensure_future(_pipe(upstream[0], client[1]))
    await asyncio.wait({up, down}, return_when=asyncio.FIRST_COMPLETED)
    if up.done():
        await down
    up.cancel()
    down.cancel()


async def _respond(writer: asyncio.StreamWriter, status: int, text: str) -> None:
    body = f"{status} {text}\n".encode()
    writer.write(
        f"HTTP/1.1 {status} {text}\r\nContent-Type: text/plain\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n".encode()
        + body
    )
    try:
        await writer.drain()
    except (ConnectionError, OSError):
        pass


async def _handle(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, allowlist: list[str], slots: asyncio.Semaphore
) -> None:
    upstream_writer = None
    try:
        async with slots:
            try:
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT_S)
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, _TIMEOUT, ConnectionError):
                return
            try:
                tunnel, host, port, forward = _parse_target(head, allowlist)
            except Refused as refused:
                _log({"type": "egress", "host": refused.host, "decision": "denied", "reason": refused.reason})
                await _respond(
                    writer, refused.status, "Forbidden" if refused.status == 403 else "Bad Request"
                )
                return
            try:
                upstream_reader, upstream_writer = await asyncio.wait_for(
                    asyncio.open_connection(host, port), _CONNECT_TIMEOUT_S
                )
            except (OSError, _TIMEOUT):
                _log({"type": "egress", "host": host, "decision": "failed", "reason": "upstream-unreachable"})
                await _respond(writer, 502, "Bad Gateway")
                return
            if tunnel:
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                upstream_writer.write(forward)
            await _relay((reader, writer), (upstream_reader, upstream_writer))
    finally:
        for w in (upstream_writer, writer):
            if w is not None:
                w.close()


def _allowlist(argv: list[str]) -> list[str]:
    raw = argv[1] if len(argv) > 1 else os.environ.get(ALLOWLIST_ENV, "[]")
    patterns = json.loads(raw)
    if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
        raise SystemExit("the allowlist must be a JSON list of strings")
    return patterns


async def _serve(allowlist: list[str], bind: str, port: int) -> None:
    slots = asyncio.Semaphore(_MAX_CONNECTIONS)
    server = await asyncio.start_server(
        lambda r, w: _handle(r, w, allowlist, slots), host=bind, port=port, limit=_MAX_HEAD
    )
    # The port bound, not the one asked for: 0 (any free port) is how tests on the host run it.
    _log({"type": "listening", "port": server.sockets[0].getsockname()[1]})
    async with server:
        await server.serve_forever()


def main(argv: list[str]) -> None:
    asyncio.run(
        _serve(_allowlist(argv), os.environ.get(BIND_ENV, "0.0.0.0"), int(os.environ.get(PORT_ENV, PORT)))
    )


if __name__ == "__main__":
    main(sys.argv)
