"""`./scripts/test`, the README's test command and CI's: it sets up what is missing, then runs pytest."""

from __future__ import annotations

import re
import subprocess
import time

import pytest

from tests.conftest import REPO

pytestmark = [pytest.mark.docker]


def test_readme_and_ci_run_the_same_command() -> None:
    readme = (REPO / "README.md").read_text()
    block = re.search(r"Run the test suite.*?```bash\n(.*?)\n```", readme, re.DOTALL)
    assert block is not None and block.group(1) == "./scripts/test"
    commands = [
        line
        for line in (REPO / ".ci/run").read_text().splitlines()
        if line and not line.startswith("#") and not line.startswith(("set ", "cd "))
    ]
    assert commands == ["exec ./scripts/test"]


def test_a_second_run_installs_nothing_and_starts_pytest_at_once() -> None:
    """On a machine that has everything (Docker answering, Chromium, images, venv), the script
    only checks, then hands its arguments to pytest."""
    command = [str(REPO / "scripts/test"), "--collect-only", "-q", "tests/cli/test_quickstart.py"]
    subprocess.run(command, cwd=REPO, capture_output=True, check=True, timeout=900)  # may set up
    started = time.monotonic()
    again = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
    took = time.monotonic() - started
    assert again.returncode == 0, again.stderr
    assert "installing" not in again.stderr and "starting dockerd" not in again.stderr
    assert (
        "test images: assay-test/busybox:1, assay-test/python:bookworm-1, assay-test/agents:" in again.stdout
    )
    assert "tests/cli/test_quickstart.py: 1" in again.stdout  # pytest got the arguments
    assert took < 30, f"the set-up checks took {took:.1f} s"
