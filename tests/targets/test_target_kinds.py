"""Targets own their kind: every kind a spec may name is registered behind `TargetKind`, and no
product code asks which kind a target is (no `isinstance` on a target's class, no comparison with
a kind's name) — it asks the registry, `kind_of(spec.target)`."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from assay.spec import TARGET_KINDS, TargetSpec, parse_spec
from assay.targets import KINDS, TargetKind, kind_of, makes_containers
from tests.helpers.layout import sources

ROOT = Path(__file__).resolve().parents[2]
SPEC_MODELS = {cls.__name__ for cls in get_args(get_args(TargetSpec)[0])}
PROTOCOLS = {"Target", "SandboxedTarget", "SessionTarget"}


def _live_target_classes() -> set[str]:
    """Classes under assay/targets that a run calls: each says whether it is `instrumented`, or
    inherits it from one that does."""
    found: set[str] = set()
    bases: dict[str, set[str]] = {}
    for path in (ROOT / "assay" / "targets").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ClassDef):
                continue
            bases[node.name] = {b.id for b in node.bases if isinstance(b, ast.Name)}
            if any(
                isinstance(t, ast.Name) and t.id == "instrumented"
                for stmt in node.body
                if isinstance(stmt, ast.Assign | ast.AnnAssign)
                for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])
            ):
                found.add(node.name)
    while grown := {name for name, of in bases.items() if of & found} - found:
        found |= grown
    return found


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
    }


def _kind_words(node: ast.AST) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and n.value in TARGET_KINDS}


def kind_checks(source: str, classes: set[str]) -> list[tuple[int, str]]:
    """Where `source` asks which kind a target is: (line, what)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("isinstance", "issubclass")
            and len(node.args) == 2
            and _names(node.args[1]) & classes
        ):
            found.append((node.lineno, f"{node.func.id} on {sorted(_names(node.args[1]) & classes)}"))
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            words = set().union(*(_kind_words(o) for o in operands))
            named = set().union(*(_names(o) for o in operands)) & classes
            if words or named:
                found.append((node.lineno, f"comparison with {sorted(words | named)}"))
    return found


@pytest.mark.slow
def test_no_product_code_asks_which_kind_a_target_is() -> None:
    classes = SPEC_MODELS | PROTOCOLS | _live_target_classes()
    assert {
        "OpenAIChatTarget",
        "AnthropicMessagesTarget",
        "PythonFunctionTarget",
        "HttpAgent",
        "ContainerAgent",
    } <= classes
    found = [
        f"{path.relative_to(ROOT)}:{line} {what}"
        for path in sources().values()
        for line, what in kind_checks(path.read_text(encoding="utf-8"), classes)
    ]
    assert found == [], "ask kind_of(spec.target) instead"


def test_the_check_finds_each_way_of_asking() -> None:
    classes = SPEC_MODELS | PROTOCOLS
    source = (
        "isinstance(t, OpenAITarget)\n"
        "isinstance(t, HttpAgentTarget | spec.ContainerTarget)\n"
        "t.kind == 'container'\n"
        "getattr(t, 'kind', None) in ('python', 'openai')\n"
        "type(t) is PythonTarget\n"
        "isinstance(t, SandboxedTarget)\n"
        "scorer.kind == 'code_exec' and isinstance(s, Sandbox)\n"
    )
    assert [line for line, _ in kind_checks(source, classes)] == [1, 2, 3, 4, 5, 6]


def test_every_kind_a_spec_may_name_is_registered() -> None:
    assert sorted(KINDS) == TARGET_KINDS
    for name, kind in KINDS.items():
        assert isinstance(kind, TargetKind) and kind.name == name


def _spec(target: dict, *scorers: dict):
    return parse_spec(
        {
            "name": "k",
            "dataset": {"path": "d.jsonl"},
            "target": target,
            "scorers": [{"kind": "exact_match"}, *scorers],
        },
        source="test",
    )


@pytest.mark.parametrize(
    ("target", "containers", "live"),
    [
        ({"kind": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}, False, False),
        ({"kind": "python", "function": "m:f"}, False, False),
        ({"kind": "http_agent", "base_url": "http://127.0.0.1:9"}, False, False),
        ({"kind": "container", "image": "busybox", "command": ["true"]}, True, True),
    ],
)
def test_what_each_kind_says_of_itself(target: dict, containers: bool, live: bool) -> None:
    spec = _spec(target)
    kind = kind_of(spec.target)
    assert (kind.makes_containers, kind.live_attempts) == (containers, live)
    assert makes_containers(spec) is containers
    # A scorer with fresh sandboxes makes containers whatever the target; one in the attempt's does not.
    fresh = {"kind": "code_exec", "checks": ["true"], "where": "fresh", "image": "busybox"}
    assert makes_containers(_spec(target, fresh)) is True
    attempt = {"kind": "code_exec", "checks": ["true"]}
    assert makes_containers(_spec(target, attempt)) is containers


_NO_DOCKER = """
import sys
from pathlib import Path
from assay.run.identity import identity_of
from assay.spec import parse_spec
from assay.spec.dataset import Item
import assay.flows.run

spec = parse_spec(
    {"name": "k", "dataset": {"path": "d.jsonl"}, "scorers": [{"kind": "exact_match"}],
     "target": {"kind": "container", "image": "busybox", "command": ["true"], "fixtures": "f/{id}"}},
    source="test",
)
identity_of(spec, [Item(item_id="a", item_index=0, input="x", expected=None, fields={"id": "a"})], Path("."))
print(sorted(m for m in sys.modules if m == "docker" or m.startswith("docker.")))
"""


@pytest.mark.slow
def test_only_a_container_run_that_prepares_or_opens_loads_the_docker_sdk(tmp_path) -> None:
    # The registry, planning and a container's identity (its fixture files) need no Docker.
    done = subprocess.run(
        [sys.executable, "-c", _NO_DOCKER],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
