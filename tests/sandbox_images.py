"""Docker images the sandbox tests build locally (no registry is reachable).

`busybox_image()`: a rootfs of Debian's static busybox, `docker import`ed; a shell and coreutils,
a non-root user `agent` (uid 1000). Built once per engine (the tag is reused when present).
"""

from __future__ import annotations

import hashlib
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
