"""The `ASSAY_*` settings: one typed model (assay/settings.py), the docs and `assay --help` listing
it, every `ASSAY_*` name in the code a setting or a named exception, bad values bad input."""

from __future__ import annotations

import re

import pytest

from assay.cli import main
from assay.settings import NOT_SETTINGS, Settings, env_name, markdown, settings
from tests.conftest import REPO
from tests.helpers.layout import sources

SETTINGS = {env_name(field) for field in Settings.model_fields}


def test_docs_list_every_setting_as_the_model_describes_it():
    doc = (REPO / "docs" / "settings.md").read_text(encoding="utf-8")
    assert markdown() in doc, "docs/settings.md is stale: run .venv/bin/python docs/update_settings.py"
    for name in NOT_SETTINGS:
        assert f"`{name}" in doc.split("are not settings")[1], name


def test_every_setting_has_a_description():
    assert all(info.description for info in Settings.model_fields.values())


def test_every_assay_name_in_the_code_is_a_setting_or_said_not_to_be_one():
    found: dict[str, str] = {}
    for module, path in sources().items():
        for name in re.findall(r"\bASSAY_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")):
            found.setdefault(name, module)
    assert {n: m for n, m in found.items() if n not in SETTINGS | set(NOT_SETTINGS)} == {}
    assert set(NOT_SETTINGS) <= set(found), "a name NOT_SETTINGS explains is used nowhere"
    assert SETTINGS.isdisjoint(NOT_SETTINGS)


def test_only_the_model_reads_a_setting_from_the_environment():
    reads = re.compile(r"(?:environ(?:\.get)?|getenv)\(\s*\[?\"(ASSAY_\w+)\"|environ\[\"(ASSAY_\w+)\"\]")
    readers = {
        module: names
        for module, path in sources().items()
        if module != "assay.settings"
        and (names := {a or b for a, b in reads.findall(path.read_text(encoding="utf-8"))} & SETTINGS)
    }
    assert readers == {}


def test_settings_are_parsed_once_and_again_when_a_value_changes(monkeypatch):
    monkeypatch.setenv("ASSAY_LEASE_TTL_S", "5")
    first = settings()
    assert first.lease_ttl_s == 5.0 and settings() is first
    monkeypatch.setenv("ASSAY_LEASE_TTL_S", "7.5")
    assert settings().lease_ttl_s == 7.5
    monkeypatch.setenv("ASSAY_LEASE_TTL_S", "")  # empty: unset, the default
    assert settings().lease_ttl_s == 60.0


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("ASSAY_LEASE_TTL_S", "soon", "ASSAY_LEASE_TTL_S='soon': Input should be a valid number"),
        ("ASSAY_LEASE_TTL_S", "0", "ASSAY_LEASE_TTL_S='0': Input should be greater than 0"),
        ("ASSAY_DASK_TIMEOUT", "-1", "ASSAY_DASK_TIMEOUT='-1': Input should be greater than 0"),
        ("ASSAY_S3_INSTANCE_CREDENTIALS", "maybe", "ASSAY_S3_INSTANCE_CREDENTIALS='maybe': Input should be"),
    ],
)
def test_a_value_that_cannot_be_its_setting_is_bad_input_naming_it(
    name, value, message, monkeypatch, capsys, tmp_path
):
    monkeypatch.setenv(name, value)
    assert main(["ls", "--store", str(tmp_path / "store")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {message}") and err.count("\n") == 1, err


def test_assay_help_lists_every_setting(capsys):
    with pytest.raises(SystemExit) as ended:
        main(["--help"])
    assert ended.value.code == 0
    shown = capsys.readouterr().out
    assert "environment (docs/settings.md):" in shown
    assert all(re.search(rf"^  {name} ", shown, flags=re.MULTILINE) for name in SETTINGS), shown
