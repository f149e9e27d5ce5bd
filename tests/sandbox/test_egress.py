"""Egress allowlisting: the proxy's pure rules, the proxy program on the host, and the whole
sidecar on the real Docker engine (scripts/test starts it; a missing engine fails these tests).

Nothing here reaches beyond this machine: the "outside" hosts are busybox httpd containers on a
network the test creates, reachable from the sidecar only.
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import docker
import docker.errors
import pytest

from assay.errors import EgressError, InputError
from assay.sandbox import _egress_proxy as proxy
from assay.sandbox.egress import _docker_name, parse_denials, sanitize_host, start_egress
from assay.sandbox.hygiene import clean, leftovers
from assay.store import Store
from tests.conftest import write_jsonl, write_spec
from tests.helpers import sandbox_images

pytestmark = [pytest.mark.docker]

SECRET_PATH = "/very-secret-path.txt"
SECRET_QUERY = "token=hunter2"
CONTENT = "allowed-content-7f3a"


# -- pure functions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "allowlist", "expected"),
    [
        ("allowed.test", ["allowed.test"], (True, "allowlisted")),
        ("ALLOWED.test.", ["allowed.test"], (True, "allowlisted")),
        ("api.example.com", ["*.example.com"], (True, "allowlisted")),
        ("a.b.example.com", ["*.example.com"], (True, "allowlisted")),
        ("example.com", ["*.example.com"], (False, "not-allowlisted")),
        ("badexample.com", ["*.example.com"], (False, "not-allowlisted")),
        ("example.com.evil.test", ["example.com"], (False, "not-allowlisted")),
        ("denied.test", ["allowed.test"], (False, "not-allowlisted")),
        ("10.0.0.5", ["allowed.test"], (False, "ip-not-allowlisted")),
        ("10.0.0.5", ["10.0.0.5"], (True, "allowlisted")),
        ("10.0.0.5", ["*.0.0.5"], (False, "ip-not-allowlisted")),
        ("[::1]", ["::1"], (True, "allowlisted")),
        ("::ffff:127.0.0.1", ["allowed.test"], (False, "ip-not-allowlisted")),
        ("evil/path?q=1", ["allowed.test"], (False, "invalid-host")),
        ("", ["allowed.test"], (False, "invalid-host")),
        ("a" * 254, ["a" * 254], (False, "invalid-host")),
    ],
)
def test_allowlist_matching(host: str, allowlist: list[str], expected: tuple[bool, str]) -> None:
    assert proxy.host_allowed(host, allowlist) == expected
    assert proxy.host_allowed(host, allowlist, 443) == expected


def test_allowlist_ports() -> None:
    allowlist = ["api.test:443", "*.cdn.test:8443", "10.0.0.5:80", "[::1]:8080", "any.test"]
    assert proxy.host_allowed("api.test", allowlist, 443) == (True, "allowlisted")
    assert proxy.host_allowed("api.test", allowlist, 80) == (False, "not-allowlisted")
    assert proxy.host_allowed("x.cdn.test", allowlist, 8443) == (True, "allowlisted")
    assert proxy.host_allowed("x.cdn.test", allowlist, 443) == (False, "not-allowlisted")
    assert proxy.host_allowed("10.0.0.5", allowlist, 80) == (True, "allowlisted")
    assert proxy.host_allowed("10.0.0.5", allowlist, 443) == (False, "ip-not-allowlisted")
    assert proxy.host_allowed("::1", allowlist, 8080) == (True, "allowlisted")
    assert proxy.host_allowed("any.test", allowlist, 22) == (True, "allowlisted")
    assert proxy.split_pattern("::1") == ("::1", None)
    with pytest.raises(ValueError):
        proxy.split_pattern("api.test:0")


def test_connect_authority() -> None:
    assert proxy.split_authority("allowed.test:443") == ("allowed.test", 443)
    assert proxy.split_authority("[::1]:8080") == ("::1", 8080)
    for bad in ("allowed.test", "allowed.test:", "allowed.test:0", "allowed.test:70000", ":443", "[::1]"):
        with pytest.raises(ValueError):
            proxy.split_authority(bad)


def test_host_sanitizing() -> None:
    assert sanitize_host("allowed.test") == "allowed.test"
    assert sanitize_host("*.example.com") == "*.example.com"
    assert sanitize_host("[::1]:443") == "[::1]:443"
    for bad in ("a.test/path", "a.test?q=1", "a b", "", None, 42, ["a.test"], "a.test\nb"):
        assert sanitize_host(bad) == "invalid-host"
    # As the seed: a host name over 253 characters (a DNS name's longest) is cut to 253.
    assert sanitize_host("x" * 253) == "x" * 253
    assert sanitize_host("a." * 200 + "test") == ("a." * 200)[:253]


def test_denials_parsed_from_an_untrusted_log() -> None:
    log = """{"type":"listening","port":3128}
{"type":"egress","host":"allowed.test","decision":"allowed","reason":"allowlisted"}
{"type":"egress","host":"denied.test","decision":"denied","reason":"not-allowlisted"}
{"type":"egress","host":"denied.test/secret?x=1","decision":"denied","reason":"Bearer abc"}
{"type":"egress","decision":"denied"}
not json at all /secret
[1, 2]
"""
    assert parse_denials(log) == [
        {"host": "denied.test", "reason": "not-allowlisted"},
        {"host": "invalid-host", "reason": "unknown"},
        {"host": "invalid-host", "reason": "unknown"},
    ]


def test_bad_allowlist_refused_before_the_engine_is_touched() -> None:
    for bad in (["a.test/x"], ["*.10.0.0.1"], ["http://a.test"], [""], ["a.test:99999"], ["a.test:x"]):
        with pytest.raises(InputError):
            start_egress(None, "run", "attempt", bad, "unused-image")  # type: ignore[arg-type]


def test_docker_names() -> None:
    assert _docker_name("assay-run1-a1") == "assay-run1-a1"
    odd = _docker_name("assay-run 1/x-a1")
    assert odd.startswith("assay-run-1-x-a1-") and len(odd) <= 63
    assert _docker_name("assay-run 1/x-a1") != _docker_name("assay-run-1-x-a1?")
    assert len(_docker_name("assay-" + "r" * 100 + "-a1")) <= 63


# -- the proxy program, on the host ------------------------------------------------------------


class _Upstream(BaseHTTPRequestHandler):
    headers_seen: ClassVar[list[dict[str, str]]] = []

    def do_GET(self) -> None:
        self.headers_seen.append({k.lower(): v for k, v in self.headers.items()})
        body = f"{CONTENT} {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def local_proxy() -> Iterator[tuple[int, int, subprocess.Popen]]:
    """A local upstream on 127.0.0.1 and the proxy program allowing exactly 127.0.0.1."""
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    process = subprocess.Popen(
        [sys.executable, proxy.__file__, json.dumps(["127.0.0.1"])],
        env={proxy.BIND_ENV: "127.0.0.1", proxy.PORT_ENV: "0"},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        listening = json.loads(process.stdout.readline())  # type: ignore[union-attr]
        assert listening["type"] == "listening"
        yield upstream.server_address[1], listening["port"], process
    finally:
        process.kill()
        process.wait()
        upstream.shutdown()
        upstream.server_close()


def test_proxy_program_forwards_allowed_and_refuses_the_rest(local_proxy: tuple[int, int, Any]) -> None:
    upstream_port, proxy_port, process = local_proxy
    opener = urllib.request.build_opener(
        urllib.request.ProxyHandler({"http": f"http://127.0.0.1:{proxy_port}"})
    )
    with opener.open(f"http://127.0.0.1:{upstream_port}{SECRET_PATH}?{SECRET_QUERY}", timeout=10) as reply:
        assert reply.read().decode() == f"{CONTENT} {SECRET_PATH}?{SECRET_QUERY}"
    with pytest.raises(urllib.error.HTTPError) as refused:
        opener.open(f"http://localhost:{upstream_port}{SECRET_PATH}?{SECRET_QUERY}", timeout=10)
    assert refused.value.code == 403
    # Not proxy requests, or targets that are no host: refused, and the log names no part of them.
    assert _raw(proxy_port, f"GET {SECRET_PATH} HTTP/1.1\r\nHost: x\r\n\r\n").startswith("HTTP/1.1 400")
    assert _raw(proxy_port, f"CONNECT evil.test{SECRET_PATH}?{SECRET_QUERY}:443 HTTP/1.1\r\n\r\n").startswith(
        "HTTP/1.1 403"
    )
    assert _raw(proxy_port, f"GET https://127.0.0.1{SECRET_PATH} HTTP/1.1\r\n\r\n").startswith("HTTP/1.1 400")
    process.kill()
    log = process.stdout.read()
    assert [json.loads(line) for line in log.splitlines()] == [
        {"type": "egress", "host": "127.0.0.1", "decision": "allowed", "reason": "allowlisted"},
        {"type": "egress", "host": "localhost", "decision": "denied", "reason": "not-allowlisted"},
        {"type": "egress", "host": "invalid-host", "decision": "denied", "reason": "unsupported-request"},
        {"type": "egress", "host": "invalid-host", "decision": "denied", "reason": "invalid-host"},
        {"type": "egress", "host": "invalid-host", "decision": "denied", "reason": "unsupported-request"},
    ]
    assert "secret" not in log and "hunter2" not in log and "evil" not in log


def test_the_proxy_sends_the_allowed_host_and_keeps_its_own_headers(
    local_proxy: tuple[int, int, Any],
) -> None:
    upstream_port, proxy_port, _ = local_proxy
    _Upstream.headers_seen.clear()
    request = (
        f"GET http://127.0.0.1:{upstream_port}/ HTTP/1.1\r\nHost: evil.test\r\n"
        "Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Trace: 1\r\nX-Kept: yes\r\n\r\n"
    )
    assert _raw(proxy_port, request).startswith("HTTP/1.0 200")
    (seen,) = _Upstream.headers_seen
    assert seen["host"] == f"127.0.0.1:{upstream_port}"  # not the client's `evil.test`
    assert seen["x-kept"] == "yes" and not [k for k in seen if k.startswith("proxy-")]


def _raw(port: int, request: str) -> str:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(request.encode())
        return connection.recv(4096).decode()


# -- the sidecar on the engine -----------------------------------------------------------------


@pytest.fixture(scope="module")
def client() -> docker.DockerClient:
    try:
        return sandbox_images.engine()
    except docker.errors.DockerException as error:
        pytest.fail(
            f"no Docker engine answers ({error}); ./scripts/test installs and starts one", pytrace=False
        )


def _run(
    client: docker.DockerClient,
    image: str,
    command: list[str],
    network: str,
    labels: dict[str, str],
    environment: dict[str, str] | None = None,
) -> str:
    """Runs an attempt-like container to its end on `network` only; returns its output."""
    container = client.containers.create(
        image,
        command,
        network=network,
        environment=environment or {},
        labels=labels,
        user="1000:1000",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        mem_limit="128m",
        pids_limit=64,
    )
    try:
        container.start()
        container.wait(timeout=120)
        return container.logs(stdout=True, stderr=True).decode("utf-8", "replace")
    finally:
        container.remove(force=True)


# Run in the attempt container (the python image: busybox-static's wget cannot resolve names, its
# static libc has no resolver to load). Each probe prints one JSON line: what came back, or the error.
_PROBE_SCRIPT = f"""
import json, os, socket, urllib.error, urllib.request

def fetch(url, proxied=True):
    handler = urllib.request.ProxyHandler() if proxied else urllib.request.ProxyHandler({{}})
    try:
        with urllib.request.build_opener(handler).open(url, timeout=5) as reply:
            return {{"status": reply.status, "body": reply.read().decode()}}
    except urllib.error.HTTPError as error:
        return {{"status": error.code}}
    except (urllib.error.URLError, OSError) as error:
        return {{"error": type(getattr(error, "reason", error)).__name__}}

def connect(authority, then=b""):
    s = socket.create_connection(("egress-proxy", 3128), timeout=10)
    s.sendall(b"CONNECT " + authority.encode() + b" HTTP/1.1\\r\\nHost: " + authority.encode() + b"\\r\\n\\r\\n")
    reply = s.recv(4096)
    if reply.startswith(b"HTTP/1.1 200") and then:
        s.sendall(then)
        while chunk := s.recv(4096):
            reply += chunk
    s.close()
    head, _, body = reply.decode(errors="replace").partition("\\r\\n\\r\\n")
    return {{"status_line": head.splitlines()[0], "rest": body}}

ip = os.environ["SERVER_IP"]
get = b"GET {SECRET_PATH} HTTP/1.0\\r\\nHost: allowed.test\\r\\n\\r\\n"
probes = {{
    "allowed": fetch("http://allowed.test:8080{SECRET_PATH}"),
    "denied": fetch("http://denied.test:8080{SECRET_PATH}?{SECRET_QUERY}"),
    "direct_name": fetch("http://allowed.test:8080{SECRET_PATH}", proxied=False),
    "direct_ip": fetch(f"http://{{ip}}:8080{SECRET_PATH}", proxied=False),
    "tunnel": connect("allowed.test:8080", get),
    "tunnel_denied": connect("denied.test:443"),
    "tunnel_raw_ip": connect(ip + ":8080"),
}}
print(json.dumps(probes))
"""


_HTTPD = f"mkdir -p /tmp/www && echo {CONTENT} > /tmp/www{SECRET_PATH} && exec httpd -f -p 8080 -h /tmp/www"


@pytest.fixture(scope="module")
def observed(client: docker.DockerClient) -> Iterator[dict[str, Any]]:
    """One egress, probed from busybox and python attempt containers, then torn down; what was
    seen along the way. Everything this module created is removed by its label in the end."""
    run_id = f"test-egress-{uuid.uuid4().hex[:10]}"
    labels = {"assay.run_id": run_id}
    busybox, python = sandbox_images.busybox_image(client), sandbox_images.python_image(client)
    seen: dict[str, Any] = {"run_id": run_id}
    try:
        servers = client.networks.create(f"{run_id}-servers", driver="bridge", internal=True, labels=labels)
        for name in ("allowed.test", "denied.test"):
            client.containers.run(
                busybox,
                ["sh", "-c", _HTTPD],
                detach=True,
                name=f"{run_id}-{name}",
                labels=labels,
                user="1000:1000",
                network=servers.name,
                networking_config={servers.name: client.api.create_endpoint_config(aliases=[name])},
            )
        allowed = client.containers.get(f"{run_id}-allowed.test")
        server_ip = allowed.attrs["NetworkSettings"]["Networks"][servers.name]["IPAddress"]

        egress = start_egress(
            client,
            run_id,
            "a1",
            ["allowed.test"],
            python,
            {"assay.test": "egress"},
            upstream_network=servers.name,
        )
        seen["network"] = egress.network
        seen["proxy_env"] = egress.proxy_env()
        env = {**egress.proxy_env(), "SERVER_IP": server_ip}
        output = _run(client, python, ["python3", "-c", _PROBE_SCRIPT], egress.network, labels, env)
        try:
            seen["probes"] = json.loads(output)
        except ValueError:
            pytest.fail(f"the probe container said: {output}")
        seen["denials"] = egress.denials()
        seen["sidecar_log"] = client.containers.get(egress.container_id).logs().decode()
        seen["sidecar"] = client.containers.get(egress.container_id).attrs

        egress.teardown()
        egress.teardown()  # idempotent
        seen["denials_after_teardown"] = egress.denials()
        egress_only = {"label": [f"assay.run_id={run_id}", "assay.role=egress"]}
        seen["left_containers"] = client.containers.list(all=True, filters=egress_only)
        seen["left_networks"] = client.networks.list(filters=egress_only)
        seen["server_ip"] = server_ip
        yield seen
    finally:
        clean(run_id)


def test_allowed_host_is_reached_through_the_proxy(observed: dict[str, Any]) -> None:
    probes = observed["probes"]
    assert probes["allowed"] == {"status": 200, "body": f"{CONTENT}\n"}
    assert probes["tunnel"]["status_line"] == "HTTP/1.1 200 Connection Established"
    assert probes["tunnel"]["rest"].startswith("HTTP/1.1 200 OK") and CONTENT in probes["tunnel"]["rest"]


def test_other_hosts_are_refused_with_403(observed: dict[str, Any]) -> None:
    probes = observed["probes"]
    assert probes["denied"] == {"status": 403}
    assert probes["tunnel_denied"]["status_line"] == "HTTP/1.1 403 Forbidden"
    assert probes["tunnel_raw_ip"]["status_line"] == "HTTP/1.1 403 Forbidden"


def test_no_way_around_the_proxy(observed: dict[str, Any]) -> None:
    """Without the proxy the attempt cannot resolve the server's name, nor reach its address."""
    probes = observed["probes"]
    assert probes["direct_name"] == {"error": "gaierror"}
    assert "error" in probes["direct_ip"] and "status" not in probes["direct_ip"], probes["direct_ip"]


def test_denials_are_hostnames_only(observed: dict[str, Any]) -> None:
    ip = observed["server_ip"]
    expected = [
        {"host": "denied.test", "reason": "not-allowlisted"},
        {"host": "denied.test", "reason": "not-allowlisted"},
        {"host": ip, "reason": "ip-not-allowlisted"},
    ]
    assert observed["denials"] == expected
    assert observed["denials_after_teardown"] == expected
    recorded = json.dumps(observed["denials"]) + observed["sidecar_log"]
    for secret in (SECRET_PATH, SECRET_PATH.strip("/"), "hunter2", "token", "very-secret"):
        assert secret not in recorded


def test_sidecar_is_confined_and_labelled(observed: dict[str, Any]) -> None:
    attrs = observed["sidecar"]
    host_config = attrs["HostConfig"]
    assert attrs["Config"]["Labels"]["assay.run_id"] == observed["run_id"]
    assert attrs["Config"]["Labels"]["assay.test"] == "egress"
    assert attrs["Config"]["User"] == "65534:65534"
    assert host_config["ReadonlyRootfs"] is True and host_config["CapDrop"] == ["ALL"]
    assert host_config["Memory"] > 0 and host_config["PidsLimit"] > 0
    assert observed["network"] in attrs["NetworkSettings"]["Networks"]
    assert observed["proxy_env"]["HTTPS_PROXY"] == "http://egress-proxy:3128"
    assert observed["proxy_env"]["no_proxy"] == observed["proxy_env"]["NO_PROXY"]


def test_teardown_removes_sidecar_and_network(observed: dict[str, Any]) -> None:
    assert observed["left_containers"] == [] and observed["left_networks"] == []


def test_production_sidecar_also_joins_the_default_bridge(client: docker.DockerClient) -> None:
    """By default the sidecar's way out is the default bridge (no request is sent through it here)."""
    run_id = f"test-egress-{uuid.uuid4().hex[:10]}"
    try:
        egress = start_egress(
            client, run_id, "a 1", ["*.example.com:443"], sandbox_images.python_image(client)
        )
        sidecar = client.containers.get(egress.container_id)
        assert set(sidecar.attrs["NetworkSettings"]["Networks"]) == {"bridge", egress.network}
        network = client.networks.get(egress.network)
        assert network.attrs["Internal"] is True and network.attrs["Labels"]["assay.run_id"] == run_id
        assert "'a 1'" not in egress.network and egress.network.startswith(f"assay-{run_id}-a-1-")
        egress.teardown()
        assert leftovers(run_id) == []
    finally:
        clean(run_id)


def test_failed_start_leaves_nothing(client: docker.DockerClient) -> None:
    run_id = f"test-egress-{uuid.uuid4().hex[:10]}"
    try:
        with pytest.raises(EgressError, match="not started"):
            start_egress(
                client, run_id, "a1", ["allowed.test"], "assay-test/no-such-image:0", upstream_network=None
            )
        assert leftovers(run_id) == []
    finally:
        clean(run_id)


def test_proxy_that_cannot_run_leaves_nothing(client: docker.DockerClient) -> None:
    """An image without python3: the sidecar cannot run, start_egress says so and cleans up."""
    run_id = f"test-egress-{uuid.uuid4().hex[:10]}"
    try:
        with pytest.raises(EgressError, match="not started|exited"):
            start_egress(
                client,
                run_id,
                "a1",
                ["allowed.test"],
                sandbox_images.busybox_image(client),
                upstream_network=None,
                ready_timeout=20,
            )
        assert leftovers(run_id) == []
    finally:
        clean(run_id)


# -- through the container target ---------------------------------------------------------------

_REFUSED_ATTEMPT = f"""
import os, urllib.error, urllib.request
try:
    urllib.request.urlopen("http://denied.test:8080{SECRET_PATH}?{SECRET_QUERY}", timeout=10)
except urllib.error.HTTPError as error:
    print("status", error.code, "via", os.environ["http_proxy"])
"""


def test_container_target_denied_host_becomes_hostname_only_evidence(tmp_path: Path, client: Any) -> None:
    """A `container` target with `egress`: the attempt is given the proxy, a host off the list is
    refused (the request never leaves the sidecar), and the attempt's `egress-denials.json` names
    the host only. (With the default upstream no allowed host is fetched: that would go outside.)"""
    python = sandbox_images.python_image(client)
    write_jsonl(tmp_path / "data.jsonl", [{"id": "a", "input": "-"}])
    spec = write_spec(
        tmp_path,
        name="egress",
        dataset={"path": "data.jsonl", "id": "id"},
        target={
            "kind": "container",
            "image": python,
            "command": ["python3", "-c", _REFUSED_ATTEMPT],
            "egress": ["allowed.test"],
            "egress_proxy_image": python,
        },
        scorers=[{"kind": "includes", "value": "status 403 via http://egress-proxy:3128"}],
        fail_on_item_error_rate=1,
    )
    from assay.flows.run import run_eval  # Prefect: imported by the test that needs it, not at collection
    from assay.orchestrate.run import RunRequest

    summary = asyncio.run(run_eval.fn(RunRequest(spec=str(spec), store=str(tmp_path / "store"))))
    run_id = summary["run_id"]
    try:
        store = Store(tmp_path / "store")
        (row,) = store.run_items(run_id).to_dicts()
        assert row["outcome"] == "completed", row["error"]
        assert store.run_scores(run_id)["score"].to_list() == [1.0]
        assert row["teardown_error"] is None
        evidence = store.artifacts_dir(run_id, "a", 0) / "egress-denials.json"
        assert json.loads(evidence.read_text()) == [{"host": "denied.test", "reason": "not-allowlisted"}]
        assert "secret" not in evidence.read_text() and "hunter2" not in evidence.read_text()
        assert f"run_id={run_id}/a/0/egress-denials.json" in row["artifacts"]
        assert json.loads(row["sandbox"])["egress_denied"] == 1
        assert leftovers(run_id) == []
    finally:
        clean(run_id)


def test_unreadable_egress_evidence_is_a_teardown_note_not_a_failure(tmp_path: Path, client: Any) -> None:
    """As the seed: when the sidecar's log cannot be read, the attempt keeps its result and the
    teardown error says the evidence is unavailable. The "sidecar" here is a real container whose
    logging driver keeps no log, so the engine refuses to read it."""
    from docker.types import LogConfig

    from assay.calls.capture import Redactor
    from assay.sandbox._docker import ImageFacts
    from assay.sandbox.egress import Egress
    from assay.targets.container.attempt import AttemptState

    run_id = f"assay-test-{uuid.uuid4().hex[:12]}"
    image = sandbox_images.busybox_image(client)
    container = client.containers.create(
        image, ["true"], labels={"assay.run_id": run_id}, log_config=LogConfig(type="none")
    )
    try:
        state = AttemptState(
            tmp_path,
            image=ImageFacts(image, "sha256:x", "root", 0, 0),
            artifacts_root=tmp_path,
            redactor=Redactor([], []),
            cleanup_seconds=30,
            offload=lambda function, *args: asyncio.to_thread(function, *args),
        )
        state.egress = Egress(client, f"{run_id}-net", container.id)

        async def scenario() -> str | None:
            await state.keep_egress_evidence()
            return await state.teardown()

        teardown_error = asyncio.run(scenario())
        assert teardown_error is not None and teardown_error.startswith("egress evidence unavailable: ")
        assert "egress_denied" not in state.facts and state.kept == []
    finally:
        clean(run_id)
