"""The `assay` process's stdout, which delivers the whole of what a command prints whatever the
reader's pace.

A pipe holds 64 KiB. When its write end is non-blocking — set so by whoever made the pipe (an event
loop's subprocess transport, a CI log collector written in Node) or by anything else sharing that
file description — a write the reader is not draining fails with EAGAIN, and CPython's buffered
text stdout drops what the pipe did not take without raising: a `--json` document over 64 KiB read
a few seconds late arrived cut, exit status 0. Here a write that would block waits until the pipe
takes more, and a stdout that fails for good (its reader gone) is an exit status, not a silence.
"""

from __future__ import annotations

import io
import os
import select
import sys


class _PatientFd(io.RawIOBase):
    """File descriptor `fd`, written as if it were blocking even when it is not; a write that fails
    for good (EPIPE: the reader is gone) is kept in `failure`, and what follows is dropped, so the
    command still finishes its work (a run, a compare) and its exit status tells."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self._fd = fd
        self.failure: OSError | None = None

    def fileno(self) -> int:
        return self._fd

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        rest = memoryview(data).cast("B")
        while rest and self.failure is None:  # all of it: a pipe takes part of a write at a time
            try:
                rest = rest[os.write(self._fd, rest) :]
            except BlockingIOError:
                select.select([], [self._fd], [])  # until the reader makes room
            except OSError as exc:
                self.failure = exc
        return len(data)


def install() -> None:
    """Make `sys.stdout` patient (the `assay` process only: a caller's stdout is its own)."""
    stdout = sys.stdout
    try:
        fd = stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's capture): nothing to wait on
        return
    stdout.flush()
    raw = _PatientFd(fd)
    # Buffered as it was: `python -u` or PYTHONUNBUFFERED (a caller reading lines as they come) not.
    buffered = isinstance(getattr(stdout, "buffer", None), io.BufferedWriter)
    sys.stdout = io.TextIOWrapper(
        io.BufferedWriter(raw) if buffered else raw,  # type: ignore[arg-type]
        encoding=stdout.encoding,
        errors=stdout.errors,
        line_buffering=stdout.line_buffering,
        write_through=getattr(stdout, "write_through", False),
    )


def flushed() -> bool:
    """Whether everything printed reached stdout; if not, says so on stderr."""
    try:
        sys.stdout.flush()
    except OSError as exc:  # a stdout that is not ours (not installed)
        failure: OSError | None = exc
    else:
        buffer = getattr(sys.stdout, "buffer", None)
        failure = getattr(getattr(buffer, "raw", buffer), "failure", None)
    if failure is None:
        return True
    print(f"error: stdout closed before everything was written to it: {failure}", file=sys.stderr)
    return False
