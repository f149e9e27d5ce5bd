"""The rooms of assay/ as docs/architecture.md draws them: each says what it does in its
`__init__`, re-exports its public names, and the rooms that re-export lazily stay lazy."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
import types

import pytest

from tests.conftest import REPO

ROOMS = [
    "assay.analysis",
    "assay.calls",
    "assay.cli",
    "assay.orchestrate",
    "assay.report",
    "assay.run",
    "assay.sandbox",
    "assay.spec",
    "assay.store",
    "assay.targets",
    "assay.testing",
]
# Rooms whose own modules are not imported with their `__init__` (assay/_lazy.py says why).
LAZY = {"assay.analysis": ["assay.analysis.compare", "assay.analysis.stats"], "assay.sandbox": ["docker"]}


@pytest.mark.parametrize("room", [room for room in ROOMS if room not in ("assay.run", "assay.orchestrate")])
def test_each_room_says_what_it_does_and_exports_real_names(room: str) -> None:
    package = importlib.import_module(room)
    doc = package.__doc__ or ""
    assert len(doc.split()) >= 8 and "TODO" not in doc, f"{room}: its __init__ needs a docstring"
    assert package.__all__, f"{room}: no __all__"
    for name in package.__all__:
        value = getattr(package, name)
        # A name shadowed by a submodule of the same name reads as the module: never export one.
        assert not isinstance(value, types.ModuleType), f"{room}.{name} is a module"


def test_lazy_rooms_load_nothing_until_a_name_is_used() -> None:
    probe = (
        "import importlib, json, sys\n"
        f"lazy = {LAZY!r}\n"
        "for room in lazy: importlib.import_module(room)\n"
        "before = {room: [m for m in mods if m in sys.modules] for room, mods in lazy.items()}\n"
        "import assay.analysis, assay.sandbox\n"
        "assay.analysis.CompareOptions, assay.sandbox.Sandbox\n"
        "after = {room: [m for m in mods if m in sys.modules] for room, mods in lazy.items()}\n"
        "print(json.dumps([before, after]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=120, check=True
    )
    before, after = json.loads(done.stdout)
    assert before == {room: [] for room in LAZY}
    assert after == LAZY
