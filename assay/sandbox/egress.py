"""Egress allowlisting for one attempt's container: an internal network and a proxy sidecar.

A sandboxed attempt gets no network at all unless its spec asks for egress. When it does,
`start_egress` creates a per-attempt `internal` bridge network (no route out) and starts a proxy
sidecar on it, also attached to an upstream network that can reach the allowed hosts. The attempt
container joins only the internal network and is given `proxy_env()`: the sidecar is its one way
out, and the sidecar carries only requests to allowlisted hosts (`_egress_proxy.py`).

What the agent tried and was refused is kept as evidence, hostname only (`denials()`), read
from the sidecar's log before it is removed. Design and threat model: docs/egress.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path
from typing import Any

import docker
import docker.errors
from docker.types import LogConfig
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from assay.errors import EgressError, InputError
from assay.sandbox import _egress_proxy
from assay.sandbox._docker import RUN_LABEL

PROXY_ALIAS = "egress-proxy"
PROXY_PORT = _egress_proxy.PORT

_SAFE_HOST = re.compile(r"[A-Za-z0-9.*:_\[\]-]+")
_MAX_HOST = 253  # a DNS name's longest; a longer one is cut to it, as in the seed
_SAFE_REASON = re.compile(r"[a-z0-9-]{1,64}")
_DOCKER_NAME = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9_.-]*")
_MAX_NAME = 63
_READY_TIMEOUT_S = 30.0
_POLL_S = 0.1
_SIDECAR_USER = "65534:65534"  # nobody: the proxy binds a high port and writes nothing
_MEMORY = "128m"
_PIDS = 128
_NANO_CPUS = 500_000_000
_MAX_DENIALS = 10_000
# The proxy reaches its own names locally; nothing else bypasses it.
_NO_PROXY = "localhost,127.0.0.1,::1"


class _Allowlist(BaseModel):
    """The spec's allowlist, checked before anything is created."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    patterns: list[str]

    @field_validator("patterns")
    @classmethod
    def _patterns(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            host = _egress_proxy.split_pattern(pattern)[0]  # its ValueError names the bad port
            bare = _egress_proxy.normalize_host(host.removeprefix("*."))
            if bare is None:
                raise ValueError(
                    f"not a host, `*.suffix` or IP literal (each with an optional :port): {pattern!r}"
                )
            if host.startswith("*.") and _egress_proxy.is_ip(bare):
                raise ValueError(f"a wildcard of an IP address means nothing: {pattern!r}")
        return sorted({p.strip().lower() for p in patterns})


def allowlist_problems(patterns: list[str]) -> list[str]:
    """What is wrong with an allowlist's entries (empty when nothing is): for preflight."""
    try:
        _Allowlist(patterns=patterns)
    except ValidationError as error:
        return [e["msg"] for e in error.errors()]
    return []


def sanitize_host(host: Any) -> str:
    """A host from the sidecar's log as it may be recorded: only hostname characters, cut to 253
    of them (as the seed), else "invalid-host". Anything path-, query- or header-like cannot pass.

    Args:
        host: the `host` field of a log line, of any type.
    """
    return host[:_MAX_HOST] if isinstance(host, str) and _SAFE_HOST.fullmatch(host) else "invalid-host"


def parse_denials(log: str) -> list[dict[str, str]]:
    """The denied requests in a sidecar log, as `{"host", "reason"}` pairs in order.

    Lines that are not the proxy's JSON, or not denials, are skipped: the sidecar's log is
    untrusted text, and only the two sanitized fields leave this function.

    Args:
        log: the sidecar's stdout.
    """
    denials = []
    for line in log.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if not isinstance(event, dict) or event.get("type") != "egress" or event.get("decision") != "denied":
            continue
        reason = event.get("reason")
        denials.append(
            {
                "host": sanitize_host(event.get("host")),
                "reason": reason if isinstance(reason, str) and _SAFE_REASON.fullmatch(reason) else "unknown",
            }
        )
        if len(denials) >= _MAX_DENIALS:
            break
    return denials


class Egress:
    """One attempt's egress: its internal network and proxy sidecar. Made by `start_egress`.

    Attributes:
        network: the internal network's name; attach the attempt container to it (and to no other).
        container_id: the sidecar's container id.
    """

    def __init__(self, client: docker.DockerClient, network: str, container_id: str) -> None:
        self._client = client
        self.network = network
        self.container_id = container_id
        self._final_log: str | None = None

    def proxy_env(self) -> dict[str, str]:
        """The environment that sends the attempt's HTTP(S) through the sidecar (both spellings,
        since tools disagree on which they read)."""
        url = f"http://{PROXY_ALIAS}:{PROXY_PORT}"
        return {
            "HTTP_PROXY": url,
            "HTTPS_PROXY": url,
            "http_proxy": url,
            "https_proxy": url,
            "NO_PROXY": _NO_PROXY,
            "no_proxy": _NO_PROXY,
        }

    def denials(self) -> list[dict[str, str]]:
        """The requests the sidecar refused so far, `{"host", "reason"}` each (hostname only).
        After `teardown` these are the ones read just before the sidecar was removed.

        Raises:
            EgressError: the sidecar's log could not be read.
        """
        return parse_denials(self._final_log if self._final_log is not None else self._read_log())

    def teardown(self) -> None:
        """Removes the sidecar, then the network; idempotent. Remove the attempt container first:
        a network with a container still attached cannot be removed.

        Raises:
            EgressError: something could not be removed (the message says what); the caller
                records it as the attempt's teardown error.
        """
        problems = []
        if self._final_log is None:
            # Evidence first: once the sidecar is gone its log is gone with it.
            try:
                self._final_log = self._read_log()
            except EgressError as error:
                self._final_log = ""
                problems.append(str(error))
        try:
            _remove_container(self._client, self.container_id)
        except docker.errors.DockerException as error:
            problems.append(f"egress sidecar {self.container_id[:12]} not removed: {error}")
        try:
            self._client.networks.get(self.network).remove()
        except docker.errors.NotFound:
            pass
        except docker.errors.DockerException as error:
            problems.append(f"egress network {self.network} not removed: {error}")
        if problems:
            raise EgressError("; ".join(problems))

    def _read_log(self) -> str:
        try:
            container = self._client.containers.get(self.container_id)
            return container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        except docker.errors.NotFound:
            return ""
        except docker.errors.DockerException as error:
            raise EgressError(f"egress sidecar log unreadable: {error}") from error


def start_egress(
    client: docker.DockerClient,
    run_id: str,
    attempt_id: str,
    allowlist: list[str],
    proxy_image: str,
    labels: dict[str, str] | None = None,
    *,
    upstream_network: str | None = "bridge",
    ready_timeout: float = _READY_TIMEOUT_S,
) -> Egress:
    """Creates the attempt's internal network and starts its proxy sidecar; returns once the
    proxy listens. On any failure, what was created is removed again before raising.

    Args:
        client: the Docker engine.
        run_id: the run's id; every object carries it as the `assay.run_id` label.
        attempt_id: the attempt's id; with `run_id` it names the network `assay-<run>-<attempt>`.
        allowlist: host patterns the sidecar lets through: `host`, `*.suffix` or an IP literal,
            each with an optional `:port` (then only that port).
        proxy_image: an image with `python3` on its PATH, for the sidecar.
        labels: more labels for the network and the sidecar (`assay.run_id` always wins).
        upstream_network: the network the sidecar reaches allowed hosts on; the default bridge in
            production. None keeps the sidecar on the internal network only (tests).
        ready_timeout: seconds to wait for the proxy to listen.

    Raises:
        InputError: an allowlist entry is not a host pattern.
        EgressError: the engine refused something, or the proxy did not come up in time.
    """
    try:
        patterns = _Allowlist(patterns=allowlist).patterns
    except ValidationError as error:
        raise InputError([e["msg"] for e in error.errors()], source="egress allowlist") from None
    all_labels = {**(labels or {}), RUN_LABEL: run_id, "assay.attempt_id": attempt_id, "assay.role": "egress"}
    name = _docker_name(f"assay-{run_id}-{attempt_id}")
    network = container = None
    try:
        network = client.networks.create(
            name, driver="bridge", internal=True, labels=all_labels, check_duplicate=True
        )
        container = client.containers.create(
            proxy_image,
            # The program goes in as `-c` text: a read-only rootfs takes no copied-in file.
            ["python3", "-c", _proxy_source(), json.dumps(patterns)],
            name=_docker_name(f"{name}-proxy"),
            labels=all_labels,
            user=_SIDECAR_USER,
            environment={"PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1"},
            read_only=True,
            tmpfs={"/tmp": "rw,noexec,nosuid,size=16m"},
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            mem_limit=_MEMORY,
            pids_limit=_PIDS,
            nano_cpus=_NANO_CPUS,
            log_config=LogConfig(type=LogConfig.types.JSON, config={"max-size": "10m", "max-file": "1"}),
            network=name,
            networking_config={name: client.api.create_endpoint_config(aliases=[PROXY_ALIAS])},
        )
        if upstream_network is not None:
            client.networks.get(upstream_network).connect(container)
        container.start()
        egress = Egress(client, name, container.id)
        _wait_listening(container, ready_timeout)
        return egress
    except BaseException as error:
        _remove_quietly(container, network)
        if isinstance(error, docker.errors.DockerException):
            raise EgressError(f"egress for attempt {attempt_id} not started: {error}") from error
        raise


def _proxy_source() -> str:
    return Path(_egress_proxy.__file__).read_text(encoding="utf-8")


def _docker_name(raw: str) -> str:
    """`raw` as a Docker object name: kept when valid and short, else made valid and shortened,
    with a hash of `raw` so that two ids never share a name."""
    if _DOCKER_NAME.fullmatch(raw) and len(raw) <= _MAX_NAME:
        return raw
    digest = hashlib.sha256(raw.encode()).hexdigest()[:12]
    cleaned = re.sub(r"[^a-zA-Z0-9_.-]", "-", raw)[: _MAX_NAME - 13].rstrip("-.") or "assay"
    return f"{cleaned}-{digest}"


def _wait_listening(container: Any, timeout: float) -> None:
    """Returns when the proxy has logged that it listens; raises if it exits or takes too long."""
    deadline = time.monotonic() + timeout
    while True:
        log = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        if any(line.startswith('{"type":"listening"') for line in log.splitlines()):
            return
        container.reload()
        if container.status not in ("created", "running"):
            tail = container.logs(stdout=True, stderr=True, tail=20).decode("utf-8", "replace")
            raise EgressError(f"egress proxy exited ({container.status}): {tail.strip()[-1000:]}")
        if time.monotonic() > deadline:
            raise EgressError(f"egress proxy not listening after {timeout:.0f} s")
        time.sleep(_POLL_S)


def _remove_container(client: docker.DockerClient, container_id: str, seconds: float = 30.0) -> None:
    """Removes the container; when someone else (`assay clean`) is already removing it, waits
    for that to finish, since its network cannot go before it has."""
    try:
        client.api.remove_container(container_id, force=True)
        return
    except docker.errors.NotFound:
        return
    except docker.errors.APIError as error:
        if error.status_code != 409:  # 409: a removal already in progress
            raise
    deadline = time.monotonic() + seconds
    while client.api.containers(all=True, filters={"id": container_id}):
        if time.monotonic() > deadline:
            raise EgressError(f"egress sidecar {container_id[:12]} still being removed after {seconds:.0f} s")
        time.sleep(_POLL_S)


def _remove_quietly(container: Any, network: Any) -> None:
    # A half-made egress is removed best-effort: the error that stopped it is the one to raise.
    for thing in (container, network):
        if thing is None:
            continue
        try:
            thing.remove(force=True) if thing is container else thing.remove()
        except docker.errors.DockerException:
            pass
