"""One sandbox container, driven through the Docker Engine API (the `docker` SDK), blocking calls.

Isolation is decided here, once: read-only root filesystem, every capability dropped,
`no-new-privileges`, memory / CPU / pids limits, network `none` unless a network is given, and
three writable tmpfs mounts: `/workspace` (owned by the attempt's user), `/tmp`, and `/assay`
(the prompt, and the eval's checks copied in at scoring time). Files go in and out as tar streams
through `exec` (`tar -x` / `tar -c`): the Engine's archive endpoints cannot reach tmpfs mounts, so
the image needs `sh` and `tar`.

The container's init and `/assay` belong to Assay's own *control* user (`CONTROL_UID`), which is
neither root nor the attempt's user: an agent, even as root, holds no capability, so it can neither
signal the init (that needs the same uid or CAP_KILL) nor change `/assay` (the owner, or
CAP_FOWNER / CAP_DAC_OVERRIDE). Breaking the sandbox is never a way out of a wrong answer's score.

Every container carries the `assay.run_id` label (`assay clean` finds what a killed run left).
"""

from __future__ import annotations

import io
import select
import socket
import struct
import tarfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors

from assay.errors import SandboxError

RUN_LABEL = "assay.run_id"
WORKSPACE = "/workspace"
CONTROL = "/assay"
# Assay's own user in every sandbox (below 65534 `nobody`, so a user-namespace remap of 64 Ki ids
# still maps it). An image whose attempt user has this uid is refused (`inspect_image`).
CONTROL_UID = 65533
CONTROL_USER = f"{CONTROL_UID}:{CONTROL_UID}"
# The init: keeps the container alive between execs and traps nothing, so even a signal that
# got through would be dropped by the kernel (an init only receives signals it handles). Teardown
# kills it from outside the container.
_IDLE = ["sh", "-c", "while :; do sleep 3600; done"]
# The workspace as the agent left it, once nothing of the agent's runs any more: every process of
# the attempt's user is killed first (nothing changes the folder while or after it is read), the
# owner's read and search permissions are restored (an agent's `chmod 000` must not make its work
# unreadable: the files are its own, so no capability is needed), then one tar stream.
_EXPORT = 'kill -KILL -1 2>/dev/null; chmod -R u+rX "$1" 2>/dev/null; exec tar -c -f - -C "$1" .'
# What Assay's own commands get on top of the memory limit when an agent exhausted it (its tmpfs
# files count against the limit and outlive the processes that wrote them).
_HEADROOM = 128 * 1024 * 1024
_READ_CHUNK = 65536
_KILL_TIMEOUT_S = 30.0
# Every process of the user who runs it (not the container's init: it is Assay's control user's).
_KILL_ALL = "kill -KILL -1 2>/dev/null; true"
_OUTPUT_LIMIT = 8 * 1024 * 1024
# A workspace comes back as one tar stream: it may be as large as its tmpfs allows.
_EXPORT_LIMIT = 4 * 1024 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class Limits:
    """Resource limits of one container.

    Args:
        memory: e.g. `"512m"`.
        cpus: CPUs it may use (fractions allowed).
        pids: most processes at once.
        workspace_size: the `/workspace` tmpfs size, e.g. `"512m"`.
    """

    memory: str = "512m"
    cpus: float = 1.0
    pids: int = 256
    workspace_size: str = "512m"


@dataclass(frozen=True, slots=True)
class ExecResult:
    """What one command in the sandbox did.

    Args:
        exit_code: its exit status; None when it was still running at its deadline.
        stdout, stderr: its output (cut at 8 MiB each).
        timed_out: whether the deadline fired first.
        duration_ms: wall time.
        truncated: whether output past the limit was dropped.
        stopped: whether `watch` stopped it (every process of its user was killed).
    """

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    duration_ms: float
    truncated: bool = False
    stopped: bool = False

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


@dataclass(frozen=True, slots=True)
class ImageFacts:
    """What an image is: its id (the image, whatever tag moves), and the user attempts run as."""

    tag: str
    image_id: str
    user: str
    uid: int
    gid: int


def client() -> docker.DockerClient:
    """A client of the engine `DOCKER_HOST` (or the local socket) names."""
    return docker.from_env(timeout=300)


def inspect_image(engine: docker.DockerClient, tag: str, user: str | None) -> ImageFacts:
    """The image's id and the user to run as: `user` if given (a name or uid), else the image's
    own `USER`, else the first non-root account (uid ≥ 1000) in its `/etc/passwd`, else root.

    Raises:
        docker.errors.ImageNotFound: the image is not on the engine (its message names it).
    """
    image = engine.images.get(tag)
    wanted = user or (image.attrs.get("Config") or {}).get("User") or None
    accounts = _accounts(engine, image.id)
    facts = ImageFacts(tag, image.id, "root", 0, 0)
    if wanted:
        for name, uid, gid in accounts:
            if wanted in (name, str(uid)):
                facts = ImageFacts(tag, image.id, name, uid, gid)
                break
        else:
            if not wanted.isdigit():
                raise ValueError(f"image {tag!r} has no user {wanted!r} in /etc/passwd")
            facts = ImageFacts(tag, image.id, wanted, int(wanted), int(wanted))
    else:
        for name, uid, gid in accounts:
            if 1000 <= uid < 65534 and uid != CONTROL_UID:
                facts = ImageFacts(tag, image.id, name, uid, gid)
                break
    if CONTROL_UID in (facts.uid, facts.gid):
        raise ValueError(
            f"user {facts.user!r} of image {tag!r} has uid or gid {CONTROL_UID}, which is Assay's own "
            "control user in a sandbox; run as another user"
        )
    return facts


def run_once(
    engine: docker.DockerClient, facts: ImageFacts, argv: list[str], timeout: float = 60.0
) -> tuple[int, str, str]:
    """Run `argv` once in a throwaway container of the image, as its user, with no network;
    returns (exit code, stdout, stderr), each cut to its last 500 characters. For preflight
    probes (an agent CLI's `--version`), never for an attempt.

    Raises:
        docker.errors.DockerException: the engine refused.
        TimeoutError: it did not end within `timeout` seconds (it is removed all the same).
    """
    container = engine.containers.create(
        facts.image_id,
        argv,
        user=f"{facts.uid}:{facts.gid}",
        network_mode="none",
        labels={RUN_LABEL: "probe"},
    )
    try:
        container.start()
        try:
            status = container.wait(timeout=timeout)
        except Exception as exc:  # the SDK raises requests' ReadTimeout
            raise TimeoutError(f"{' '.join(argv)} did not end within {timeout:g}s") from exc
        out = container.logs(stdout=True, stderr=False)
        err = container.logs(stdout=False, stderr=True)
        return int(status.get("StatusCode", -1)), _tail(out), _tail(err)
    finally:
        container.remove(force=True)


def _accounts(engine: docker.DockerClient, image_id: str) -> list[tuple[str, int, int]]:
    probe = engine.containers.create(image_id, ["true"], labels={RUN_LABEL: "probe"})
    try:
        stream, _ = probe.get_archive("/etc/passwd")
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            member = tar.extractfile(tar.getmembers()[0])
            text = member.read().decode("utf-8", "replace") if member else ""
    except docker.errors.NotFound:
        return []
    finally:
        probe.remove(force=True)
    accounts = []
    for line in text.splitlines():
        fields = line.split(":")
        if len(fields) >= 4 and fields[2].isdigit() and fields[3].isdigit():
            accounts.append((fields[0], int(fields[2]), int(fields[3])))
    return accounts


class Sandbox:
    """A live container. Create with `Sandbox.create`, end with `remove()`.

    Args:
        engine: the Docker client.
        container: the started container.
        facts: its image and user.
    """

    def __init__(
        self, engine: docker.DockerClient, container: Any, facts: ImageFacts, limits: Limits
    ) -> None:
        self.engine = engine
        self.container = container
        self.facts = facts
        self.limits = limits

    @classmethod
    def create(
        cls,
        engine: docker.DockerClient,
        facts: ImageFacts,
        *,
        labels: dict[str, str],
        limits: Limits,
        network: str | None = None,
        dns: list[str] | None = None,
    ) -> Sandbox:
        """Create and start a fresh container of `facts.image_id`.

        Args:
            engine: the Docker client.
            facts: the image and user.
            labels: its labels (`assay.run_id` among them).
            limits: its resource limits.
            network: a network to join (the egress proxy's internal network); default none.
            dns: resolvers for names outside the network (`127.0.0.1`: none — an internal
                network would otherwise forward lookups, a channel out).
        """
        container = engine.containers.create(
            facts.image_id,
            _IDLE,
            labels=labels,
            user=CONTROL_USER,
            working_dir=WORKSPACE,
            network_mode=network or "none",
            dns=dns,
            read_only=True,
            tmpfs={
                WORKSPACE: f"rw,exec,size={limits.workspace_size},uid={facts.uid},gid={facts.gid},mode=0755",
                "/tmp": "rw,exec,mode=1777,size=256m",
                CONTROL: f"rw,mode=0755,size=64m,uid={CONTROL_UID},gid={CONTROL_UID}",
            },
            cap_drop=["ALL"],
            security_opt=["no-new-privileges"],
            privileged=False,
            mem_limit=limits.memory,
            memswap_limit=limits.memory,
            nano_cpus=int(limits.cpus * 1e9),
            pids_limit=limits.pids,
        )
        sandbox = cls(engine, container, facts, limits)
        try:
            container.start()
        except Exception:
            sandbox.remove()
            raise
        return sandbox

    # -- commands -------------------------------------------------------------------------------

    def exec(
        self,
        argv: list[str],
        *,
        stdin: bytes | None = None,
        user: str | None = None,
        workdir: str = WORKSPACE,
        timeout: float | None = None,
        environment: dict[str, str] | None = None,
        output_limit: int = _OUTPUT_LIMIT,
        watch: Callable[[bytes], bool] | None = None,
    ) -> ExecResult:
        """Run `argv` in the container and wait for it, at most `timeout` seconds.

        Args:
            argv: the command (no shell unless you run one).
            stdin: bytes written to its standard input, then closed.
            user: who runs it (default: the attempt's user).
            workdir: its working directory.
            timeout: seconds; at the deadline the output so far is returned with `timed_out`
                (the process is left to the container's teardown).
            environment: plain (non-secret) variables; secrets go through an env file.
            output_limit: bytes kept of stdout and of stderr each (the rest is dropped).
            watch: called with each piece of stdout as it comes; True stops the command: every
                process of its user is killed (an agent stopped at an event it will not recover
                from), and the output so far comes back with `stopped` set.
        """
        started = time.perf_counter()
        run_as = user or str(self.facts.uid)
        api = self.engine.api
        created = api.exec_create(
            self.container.id,
            argv,
            stdin=stdin is not None,
            user=run_as,
            workdir=workdir,
            environment=environment,
        )
        stop = None
        if watch is not None:

            def stop() -> None:
                # The shell's own `kill`: an image need not have /bin/kill (Debian's minbase has none).
                self.exec(["sh", "-c", _KILL_ALL], user=run_as, workdir="/", timeout=_KILL_TIMEOUT_S)

        sock = api.exec_start(created["Id"], socket=True)
        raw: socket.socket = getattr(sock, "_sock", sock)
        try:
            if stdin is not None:
                raw.sendall(stdin)
                raw.shutdown(socket.SHUT_WR)
            stdout, stderr, timed_out, truncated, stopped = _read_frames(
                raw, None if timeout is None else started + timeout, output_limit, watch, stop
            )
        finally:
            sock.close()
        exit_code = None if timed_out else api.exec_inspect(created["Id"]).get("ExitCode")
        return ExecResult(
            exit_code, stdout, stderr, timed_out, (time.perf_counter() - started) * 1000, truncated, stopped
        )

    def put_files(
        self,
        folder: str,
        files: dict[str, bytes],
        *,
        control: bool = False,
        mode: int = 0o644,
        replace: bool = False,
    ) -> None:
        """Write `files` (relative path → bytes) under `folder` (created; emptied first with
        `replace`), owned by whoever extracts them: Assay's control user with `control` (the only
        one who can write under /assay), else the attempt's user."""
        script = ('rm -rf "$1" && ' if replace else "") + 'mkdir -p "$1" && tar -x -f - -C "$1"'
        result = self.exec(
            ["sh", "-c", script, "put", folder],
            stdin=_tar(files, mode),
            user=CONTROL_USER if control else None,
            workdir="/",
        )
        if not result.ok:
            raise SandboxError(f"copying files into {folder} failed: {_exit(result)}")

    def export(self, folder: str) -> dict[str, bytes]:
        """Every regular file under `folder` (relative path → bytes; links and devices are left
        out), read once every process of the attempt's user has been killed (`_EXPORT`)."""
        result = self.exec(["sh", "-c", _EXPORT, "export", folder], workdir="/", output_limit=_EXPORT_LIMIT)
        if result.truncated:
            raise SandboxError(f"{folder} is larger than {_EXPORT_LIMIT >> 20} MiB: not exported")
        if not result.ok:
            raise SandboxError(f"reading {folder} failed: {_exit(result)}")
        return untar(result.stdout)

    def add_headroom(self) -> None:
        """Raise the memory limit for Assay's own commands, after the agent: files it left in
        tmpfs mounts count against the limit, so an agent could otherwise fill it and make every
        later command (the export, the checks) die."""
        memory = docker.utils.parse_bytes(self.limits.memory) + _HEADROOM
        self.container.update(mem_limit=memory, memswap_limit=memory)

    def remove(self) -> None:
        """Kill and remove the container and its mounts."""
        try:
            self.container.remove(force=True, v=True)
        except docker.errors.NotFound:
            pass
        except docker.errors.APIError as exc:
            if exc.status_code != 409:  # 409: a removal already in progress
                raise


def _read_frames(
    raw: socket.socket,
    deadline: float | None,
    limit: int,
    watch: Callable[[bytes], bool] | None = None,
    stop: Callable[[], None] | None = None,
) -> tuple[bytes, bytes, bool, bool, bool]:
    """Demultiplex the engine's framed stream (8-byte headers: stream id, length) until EOF or
    the deadline; returns stdout, stderr, whether the deadline fired, whether output was cut,
    whether `watch` asked to stop (`stop` is then called once, and the rest read to EOF)."""
    truncated = stopped = False
    buffer = bytearray()
    out: list[bytearray] = [bytearray(), bytearray(), bytearray()]
    while True:
        if deadline is not None:
            left = deadline - time.perf_counter()
            if left <= 0:
                return bytes(out[1]), bytes(out[2]), True, truncated, stopped
            ready, _, _ = select.select([raw], [], [], left)
            if not ready:
                continue
        chunk = raw.recv(_READ_CHUNK)
        if not chunk:
            return bytes(out[1]), bytes(out[2]), False, truncated, stopped
        buffer += chunk
        while len(buffer) >= 8:
            stream, length = struct.unpack(">BxxxL", buffer[:8])
            if len(buffer) < 8 + length:
                break
            target = out[stream] if stream in (1, 2) else out[0]
            payload = bytes(buffer[8 : 8 + length])
            if len(target) + length <= limit:
                target += payload
            else:
                truncated = True
            del buffer[: 8 + length]
            if stream == 1 and watch is not None and not stopped and watch(payload):
                stopped = True
                if stop is not None:
                    stop()


def _tar(files: dict[str, bytes], mode: int = 0o644) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        folders: set[str] = set()
        for name, data in sorted(files.items()):
            parts = Path(name).parts
            for depth in range(1, len(parts)):
                folder = "/".join(parts[:depth])
                if folder not in folders:
                    folders.add(folder)
                    info = tarfile.TarInfo(folder)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def untar(data: bytes) -> dict[str, bytes]:
    """Regular files of a tar stream; absolute or climbing paths are never returned."""
    files: dict[str, bytes] = {}
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        for member in tar:
            name = member.name.removeprefix("./")
            if not member.isfile() or not name or name.startswith("/") or ".." in Path(name).parts:
                continue
            handle = tar.extractfile(member)
            files[name] = handle.read() if handle else b""
    return files


def _exit(result: ExecResult) -> str:
    """Why a command failed: its exit status and its stderr's tail."""
    return f"exit status {result.exit_code}: {_tail(result.stderr) or '(no stderr)'}"


def _tail(data: bytes, limit: int = 500) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else "…" + text[-limit:]


def folder_files(folder: Path) -> dict[str, bytes]:
    """Every regular file under a host folder (relative path → bytes), symlinks left out."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.is_symlink()
    }
