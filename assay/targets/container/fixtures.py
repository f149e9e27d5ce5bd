"""An item's fixture and checks folders: which folder a template names, and the files in them
(their bytes belong to the run's identity). Needs no Docker."""

from __future__ import annotations

from pathlib import Path

from assay.spec import ContainerTarget
from assay.spec.dataset import Item
from assay.targets._base import render


def folder(template: str, item: Item, spec_dir: Path) -> Path | None:
    """The folder a template names for an item; None when it cannot be filled or leaves the
    spec's folder (an item's fields are data: `../..` must not copy the machine into a sandbox)."""
    try:
        found = (spec_dir / render(template, item)).resolve()
    except (KeyError, IndexError, ValueError):
        return None
    return found if found.is_relative_to(spec_dir.resolve()) else None


def fixture_files(spec: ContainerTarget, items: list[Item], spec_dir: Path) -> list[Path]:
    """Every file of every item's fixtures and checks folders (symlinks left out); a folder that
    is missing or outside the spec's folder is skipped (preflight reports it)."""
    found: set[Path] = set()
    for template in (spec.fixtures, spec.checks):
        if template is None:
            continue
        for item in items:
            where = folder(template, item, spec_dir)
            if where is not None and where.is_dir():
                found.update(p for p in where.rglob("*") if p.is_file() and not p.is_symlink())
    return sorted(found)
