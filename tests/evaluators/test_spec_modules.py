"""A spec's `module:function` is its own folder's module, even when another spec run earlier in
the same process had a module of the same name (the quickstart's and humaneval's `solver.py`)."""

from __future__ import annotations

from pathlib import Path

from assay.evaluators._imports import import_callable


def _folder(root: Path, name: str, body: str) -> Path:
    folder = root / name
    folder.mkdir()
    (folder / "solver.py").write_text(body)
    return folder


def test_two_folders_with_a_module_of_the_same_name_each_get_their_own(tmp_path: Path) -> None:
    first = _folder(tmp_path, "first", "def solve(x):\n    return 'first'\n")
    second = _folder(tmp_path, "second", "def complete(x):\n    return 'second'\n")
    assert import_callable("solver:solve", spec_dir=str(first))(1) == "first"
    assert import_callable("solver:complete", spec_dir=str(second))(1) == "second"
    # and back: the first spec's module again, not the second's
    assert import_callable("solver:solve", spec_dir=str(first))(1) == "first"


def test_a_module_the_folder_does_not_hold_is_imported_as_usual(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "only", "def solve(x):\n    return x\n")
    assert import_callable("json:dumps", spec_dir=str(folder))([1]) == "[1]"
