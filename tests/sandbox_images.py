"""Docker images the sandbox tests build locally (no registry is reachable).

`busybox_image()`: a rootfs of Debian's static busybox, `docker import`ed; a shell and coreutils,
a non-root user `agent` (uid 1000). Built once per engine (the tag is reused when present).
"""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import time

import docker
import docker.errors

BUSYBOX_TAG = "assay-test/busybox:1"
_BUSYBOX = "/bin/busybox"


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


def _add(tar: tarfile.TarFile, name: str, *, data: bytes | None = None, mode: int = 0o755,
         kind: bytes = tarfile.REGTYPE, link: str = "") -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.linkname = kind, mode, link
    info.size = len(data) if data is not None else 0
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def _busybox_rootfs() -> bytes:
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
        _add(tar, "etc/passwd", mode=0o644,
             data=b"root:x:0:0:root:/root:/bin/sh\nagent:x:1000:1000:agent:/workspace:/bin/sh\n")
        _add(tar, "etc/group", mode=0o644, data=b"root:x:0:\nagent:x:1000:\n")
    return buffer.getvalue()


def busybox_image(client: docker.DockerClient | None = None) -> str:
    """The busybox test image's tag, built on first use."""
    client = client or engine()
    try:
        client.images.get(BUSYBOX_TAG)
    except docker.errors.ImageNotFound:
        rootfs = _busybox_rootfs()
        subprocess.run(
            ["docker", "import", "--change", "ENV PATH=/bin", "--change", "WORKDIR /workspace", "-", BUSYBOX_TAG],
            input=rootfs, check=True, capture_output=True,
        )
    return BUSYBOX_TAG
