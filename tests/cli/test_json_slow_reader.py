"""`--json` into a pipe whose reader starts late: the whole document arrives, or the exit status
says it did not (issue 30, point 15).

The pipe's write end is non-blocking, as libuv (Node: a CI log collector, `npx`) leaves the stdout
it hands to the processes it starts: a write the reader is not draining fails with EAGAIN, and
CPython's buffered stdout used to drop the rest of a document over the pipe's 64 KiB, exit 0.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from assay.cli import EXIT_OK, EXIT_OUTPUT
from tests.conftest import REPO, openai_spec

PIPE_BYTES = 64 * 1024
# Enough scorers for a run summary well over what the pipe holds (~90 KiB).
SCORERS = [{"kind": "regex", "name": f"digits_{n}", "pattern": "\\d+"} for n in range(300)]


def start_into_pipe(spec: Path, store: Path) -> tuple[subprocess.Popen[bytes], int]:
    """`assay run SPEC --json` writing into a fresh pipe with a non-blocking write end; returns the
    process and the read end (nobody reads it yet)."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    process = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "run", str(spec), "--store", str(store), "--json"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        cwd=REPO,
    )
    os.close(write_end)
    return process, read_end


@pytest.mark.slow
def test_a_json_document_over_64_kib_reaches_a_reader_that_waits_10_s(tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=20, scorers=SCORERS)
    process, read_end = start_into_pipe(spec, tmp_path / "store")
    time.sleep(10)  # a caller that waits first; the run is over long before
    with os.fdopen(read_end, "rb") as pipe:
        document = pipe.read()
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_OK, stderr.decode()
    assert len(document) > PIPE_BYTES
    summary = json.loads(document)
    assert summary["status"] == "completed" and len(summary["scorers"]) == len(SCORERS)


@pytest.mark.slow
def test_a_reader_that_leaves_before_the_document_is_written_is_exit_status_4(tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=20, scorers=SCORERS)
    process, read_end = start_into_pipe(spec, tmp_path / "store")
    with os.fdopen(read_end, "rb") as pipe:
        pipe.read(1)  # the first byte, then the reader goes away
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == EXIT_OUTPUT, stderr.decode()
    assert stderr.decode().splitlines()[-1].startswith("error: stdout closed before everything was written")
