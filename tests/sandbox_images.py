"""Docker images the sandbox tests build locally (no registry is reachable).

`busybox_image()`: a rootfs of Debian's static busybox, `docker import`ed; a shell and coreutils,
a non-root user `agent` (uid 1000). Built once per engine (the tag is reused when present).

`python_image()`: Debian bookworm (`debootstrap --variant=minbase`) with python3, git and
ca-certificates, the same user `agent` (uid 1000, home /workspace). Debootstrap takes minutes, so
its rootfs tarball is cached under `~/.cache/assay-test/` and a re-import after `docker image rm`
takes seconds; a file lock keeps concurrent pytest processes from building it twice.
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
    if _has_image(client, PYTHON_TAG):
        return PYTHON_TAG
    _CACHE.mkdir(parents=True, exist_ok=True)
    # Pytest processes on one machine may race here; the loser waits, then finds the tag.
    with open(_CACHE / f"{_PYTHON_ROOTFS}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _has_image(client, PYTHON_TAG):
            return PYTHON_TAG
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
    return PYTHON_TAG


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
    print(f"test images: {busybox_image()}, {python_image()}")
