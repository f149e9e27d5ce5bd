"""The house's rules, checked: imports run only downward through the layers of
docs/architecture.md, and no module imports itself back through others (no circle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.helpers.layout import sources

ROOT = Path(__file__).resolve().parents[2]

# Rooms from the bottom up: a module may import its own room and rooms of lower layers only.
LAYERS: list[set[str]] = [
    {"assay.outcomes", "assay.errors"},
    # The schema describes its columns with the words of assay.outcomes.
    {"assay", "assay._schema"},
    {"assay.store", "assay.sandbox", "assay.testing"},
    {"assay.calls"},
    {"assay.evaluators"},
    {"assay.spec"},
    {"assay.targets"},
    {"assay.run"},
    {"assay.analysis"},
    {"assay.report"},
    {"assay.orchestrate"},
    # Everything that imports Prefect: the tasks and the host they run in, then the flows.
    {"assay.tasks"},
    {"assay.flows"},
    # `assay view`'s web app: above the report, the analysis and the store; the CLI serves it.
    {"assay.view"},
    {"assay.cli"},
]


def _modules() -> dict[str, Path]:
    return sources()


def _imports(name: str, path: Path, known: set[str]) -> list[tuple[str, int]]:
    """Every import of a known module, functions' own imports included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                package = package[: len(package) - (node.level - 1)]
                base = ".".join([*package, base] if base else package)
            targets = [f"{base}.{alias.name}" for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in known:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.append((target, node.lineno))
    return found


def _room(module: str) -> tuple[str, int]:
    """The longest room name that `module` is, or lies in, and that room's layer."""
    best = None
    for layer, rooms in enumerate(LAYERS):
        for room in rooms:
            if (module == room or module.startswith(room + ".")) and (
                best is None or len(room) > len(best[0])
            ):
                best = (room, layer)
    assert best is not None, (
        f"{module} belongs to no room of LAYERS: add it there and to docs/architecture.md"
    )
    return best


@pytest.mark.slow
def test_imports_run_only_downward() -> None:
    modules = _modules()
    upward = []
    for name, path in modules.items():
        room, layer = _room(name)
        for target, line in _imports(name, path, set(modules)):
            target_room, target_layer = _room(target)
            if target_room != room and target_layer >= layer:
                upward.append(f"{path.relative_to(ROOT)}:{line} {name} -> {target}")
    assert upward == []


@pytest.mark.slow
def test_no_import_circles() -> None:
    modules = _modules()
    graph = {name: {t for t, _ in _imports(name, path, set(modules))} for name, path in modules.items()}
    circles = []
    for start in graph:
        stack, seen = [(start, [start])], set()
        while stack:
            node, trail = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    circles.append(" -> ".join([*trail, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*trail, nxt]))
    assert circles == []


# Outside flows/ and tasks/, the only modules that may import Prefect, each only when asked for:
# inside a function, or (fleet_prefect) at the top of a module itself imported only when asked.
PREFECT_WHEN_ASKED = {
    "assay.flows.prefect_env": "Prefect's settings, read only when a settings file could name an API",
    "assay.calls.keys": "a key held in a Prefect Secret block",
    "assay.calls.rate": "`ASSAY_RATE_SHARE=prefect` needs PREFECT_API_URL",
}
IMPORTED_WHEN_ASKED = {"assay.calls.fleet_prefect": "the rate window as a Prefect global concurrency limit"}


def test_only_the_prefect_rooms_import_prefect() -> None:
    """Prefect lives in one room, `assay.tasks` and `assay.flows` (docs/architecture.md); anyone
    else imports it only when a spec or setting asks, and never at module level."""
    strays = []
    for name, path in _modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top_level = {id(node) for node in tree.body}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                targets = [node.module or ""]
            else:
                continue
            if not any(t == "prefect" or t.startswith(("prefect.", "prefect_")) for t in targets):
                continue
            in_room = name.startswith(("assay.tasks", "assay.flows")) and name != "assay.flows.prefect_env"
            if (
                in_room
                or name in IMPORTED_WHEN_ASKED
                or (name in PREFECT_WHEN_ASKED and id(node) not in top_level)
            ):
                continue
            strays.append(f"{path.relative_to(ROOT)}:{node.lineno} {name}")
    assert strays == []
