"""docs/spec.md, the spec's full reference, is what docs/update_spec.py makes of the spec's models,
and every field of it has a meaning."""

from __future__ import annotations

import importlib.util
import types

from tests.conftest import REPO


def _update_spec() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("update_spec", REPO / "docs" / "update_spec.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_docs_spec_is_what_update_spec_writes() -> None:
    doc = (REPO / "docs" / "spec.md").read_text(encoding="utf-8")
    assert _update_spec().render() == doc, "docs/spec.md is stale: run .venv/bin/python docs/update_spec.py"


def test_every_field_of_the_spec_has_a_meaning() -> None:
    assert _update_spec().undocumented() == []


def test_the_reference_covers_every_target_kind_and_scorer() -> None:
    from assay.evaluators import SCORER_KINDS
    from assay.spec.targets import TARGET_KINDS

    doc = (REPO / "docs" / "spec.md").read_text(encoding="utf-8")
    assert [k for k in TARGET_KINDS if f"### target kind `{k}`" not in doc] == []
    assert [k for k in SCORER_KINDS if f"### scorer `{k}`" not in doc] == []
