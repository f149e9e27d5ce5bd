"""Where the product's modules live: the packages pyproject.toml installs and their folders.

flows/, tasks/ and evaluators/ are top-level folders (the design card's) installed as
assay.flows, assay.tasks and assay.evaluators (pyproject's `package-dir`), so a module's name is
not its path: `module_name` maps one to the other for the tests that read the sources.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
PACKAGES: list[str] = _SETUPTOOLS["packages"]
# The top-level product packages and their folders: assay, and each package-dir mapping.
ROOTS: dict[str, Path] = {"assay": ROOT / "assay"} | {
    package: ROOT / folder for package, folder in _SETUPTOOLS["package-dir"].items()
}


def sources() -> dict[str, Path]:
    """Every product module's dotted name and file."""
    found: dict[str, Path] = {}
    for package, folder in ROOTS.items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join([package, *parts])
            if package == "assay" and parts and f"assay.{parts[0]}" in ROOTS:
                raise AssertionError(f"{path} shadows the folder installed as assay.{parts[0]}")
            found[name] = path
    return found


def module_name(path: Path) -> str:
    """The dotted name of the product module at `path`."""
    for name, source in sources().items():
        if source == path.resolve():
            return name
    raise KeyError(path)
