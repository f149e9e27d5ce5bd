"""A `--store` that cannot be a store is bad input for every command that takes one: a path that
is (or lies below) a file, an `s3://` URL with no credentials in the environment. Exit 2, one
line naming what is wrong or missing, before any request and with nothing written.

No test here may reach an instance metadata address: `AWS_METADATA_ENDPOINT` points at a closed
port of 127.0.0.1 (obstore honours it), so a check that let a request through fails fast."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import pytest

from assay.cli import main
from assay.cli._parser import build_parser
from assay.errors import InputError
from assay.store import Store
from tests.conftest import openai_spec, run_assay

_CREDENTIALS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_SKIP_SIGNATURE",
    "AWS_PROFILE",
    "ASSAY_S3_INSTANCE_CREDENTIALS",
    "ASSAY_STORE",
)
_NO_METADATA = {"AWS_METADATA_ENDPOINT": "http://127.0.0.1:9"}


@pytest.fixture(autouse=True)
def _no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _CREDENTIALS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_METADATA_ENDPOINT", _NO_METADATA["AWS_METADATA_ENDPOINT"])


def _commands_with_store() -> set[str]:
    """Every command (`requests export` for a nested one) whose arguments include `--store`."""
    found = set()

    def walk(parser: argparse.ArgumentParser, prefix: str) -> None:
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for name, child in action.choices.items():
                    walk(child, f"{prefix} {name}".strip())
            elif "--store" in action.option_strings:
                found.add(prefix)

    walk(build_parser(), "")
    return found


def _argv(command: str, spec: Path) -> list[str]:
    """The command with the arguments it needs (none of them looked at before the store)."""
    arguments = {
        "run": [str(spec)],
        "estimate": [str(spec)],
        "resume": ["RUN"],
        "rescore": ["RUN", "--scorer", "{kind: exact_match}"],
        "compare": ["RUN", "--candidate", "OTHER"],
        "power": ["RUN", "--mde", "0.1"],
        "nightly": [str(spec)],
        "leaderboard": ["MATRIX"],
        "requests export": ["RUN"],
        "requests validate": [str(spec)],
        "trajectories export": ["RUN"],
        "report": ["RUN"],
        "clean": ["RUN"],
        "show": ["RUN"],
        "ls": [],
        "ui": ["--port", "1"],
        "view": ["--port", "1"],
        "labels import": ["labels.csv"],
        "labels export": ["RUN"],
        "labels sample": ["RUN", "--scorer", "judge"],
        "agreement": ["RUN", "--scorer", "judge"],
    }
    return [*command.split(), *arguments[command]]


def test_the_table_below_names_every_command_that_takes_a_store(tmp_path):
    spec = tmp_path / "spec.yaml"
    for command in _commands_with_store():
        _argv(command, spec)  # a KeyError names a command this file does not check


@pytest.fixture
def spec(tmp_path: Path, mock) -> Path:
    return openai_spec(tmp_path, mock.base_url, n=3)


_BAD = {
    "a file": (
        "afile",
        "store '{root}': it is a file; name a folder (made if missing) or s3://bucket/prefix",
    ),
    "below a file": (
        "afile/store",
        "store '{root}': '{base}/afile' is a file, so no folder can be made below it",
    ),
    "s3 without credentials": (
        "s3://evals/assay",
        (
            "store 's3://evals/assay': no AWS credentials: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY are "
            "not set (nor a web identity or container credentials; on an EC2 instance role, set "
            "ASSAY_S3_INSTANCE_CREDENTIALS=1)"
        ),
    ),
}


@pytest.mark.parametrize("bad", list(_BAD))
@pytest.mark.parametrize("command", sorted(_commands_with_store() - {"ui"}))
def test_a_store_that_cannot_be_one_is_bad_input_before_anything_runs(
    command, bad, spec, tmp_path, mock, capsys
):
    (tmp_path / "afile").write_text("not a folder\n")
    name, message = _BAD[bad]
    root = name if name.startswith("s3://") else str(tmp_path / name)
    before = sorted(p.name for p in tmp_path.iterdir())

    status = main([*_argv(command, spec), "--store", root])

    err = capsys.readouterr().err
    assert status == 2, err
    assert err == f"error: {message.format(root=root, base=tmp_path)}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == before, "nothing written"
    assert mock.stats()["requests"] == 0, "no request"


@pytest.mark.slow
def test_assay_ui_refuses_a_store_that_is_a_file_before_its_server_starts(tmp_path):
    (tmp_path / "afile").write_text("")
    shown = run_assay("ui", "--port", "1", "--store", str(tmp_path / "afile"), timeout=60)
    assert shown.returncode == 2, shown.stderr
    assert (
        shown.stderr
        == f"error: store '{tmp_path / 'afile'}': it is a file; name a folder (made if missing) or s3://bucket/prefix\n"
    )


def test_a_run_on_s3_without_credentials_exits_at_once_in_a_real_process(tmp_path, mock):
    spec = openai_spec(tmp_path, mock.base_url, n=3)
    started = time.monotonic()
    shown = run_assay("run", str(spec), "--store", "s3://evals/assay", env=_NO_METADATA, timeout=60)
    assert shown.returncode == 2, shown.stderr
    assert shown.stderr.count("\n") == 1 and "no AWS credentials" in shown.stderr
    assert time.monotonic() - started < 30, "no credential chain retried"
    assert mock.stats()["requests"] == 0


@pytest.mark.parametrize(
    ("given", "missing"),
    [
        ({"AWS_ACCESS_KEY_ID": "AKIA0000"}, "AWS_SECRET_ACCESS_KEY is not set (AWS_ACCESS_KEY_ID is)"),
        ({"AWS_SECRET_ACCESS_KEY": "x"}, "AWS_ACCESS_KEY_ID is not set (AWS_SECRET_ACCESS_KEY is)"),
        (
            {"AWS_WEB_IDENTITY_TOKEN_FILE": "/tmp/token"},
            "AWS_ROLE_ARN is not set (AWS_WEB_IDENTITY_TOKEN_FILE is)",
        ),
    ],
)
def test_half_a_credential_names_the_other_half(given, missing, monkeypatch, capsys):
    for name, value in given.items():
        monkeypatch.setenv(name, value)
    assert main(["ls", "--store", "s3://evals/assay"]) == 2
    assert capsys.readouterr().err == f"error: store 's3://evals/assay': {missing}\n"


def test_a_profile_that_is_not_read_is_said(monkeypatch, capsys):
    monkeypatch.setenv("AWS_PROFILE", "evals")
    assert main(["ls", "--store", "s3://evals/assay"]) == 2
    assert "AWS_PROFILE is set, but profiles are not read" in capsys.readouterr().err


@pytest.mark.parametrize(
    "source",
    [
        {"AWS_ACCESS_KEY_ID": "AKIA0000", "AWS_SECRET_ACCESS_KEY": "x"},
        {"AWS_WEB_IDENTITY_TOKEN_FILE": "/tmp/token", "AWS_ROLE_ARN": "arn:aws:iam::0:role/r"},
        {"AWS_CONTAINER_CREDENTIALS_RELATIVE_URI": "/v2/credentials/x"},
        {"AWS_SKIP_SIGNATURE": "true"},
        {"ASSAY_S3_INSTANCE_CREDENTIALS": "1"},
    ],
)
def test_any_credential_source_the_client_reads_is_accepted(source, monkeypatch):
    for name, value in source.items():
        monkeypatch.setenv(name, value)
    assert Store("s3://evals/assay").root == "s3://evals/assay"  # made; nothing asked yet


def test_the_store_itself_refuses_a_file_as_its_root(tmp_path):
    (tmp_path / "afile").write_text("")
    with pytest.raises(InputError, match="it is a file"):
        Store(tmp_path / "afile")
