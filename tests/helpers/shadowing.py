"""A spec folder whose user modules are named like Assay's own top-level folders.

A user's `tasks.py`, `flows.py` and `evaluators.py` beside their spec: the spec's folder goes first
on `sys.path` (a `module:function` is found there), so before Assay installed flows/, tasks/ and
evaluators/ as `assay.flows`, `assay.tasks` and `assay.evaluators`, these shadowed them — or were
shadowed by them once Assay's had been imported (`'tasks' has no attribute 'solve'`).
"""

from __future__ import annotations

from pathlib import Path

from tests.conftest import write_jsonl, write_spec

N_ITEMS = 6


def shadowing_spec(folder: Path) -> Path:
    """A spec whose target is the user's `tasks:solve` and whose scorer is `evaluators:graded`,
    beside a user `flows.py` that would break any import of it as Assay's."""
    (folder / "tasks.py").write_text("def solve(question: str) -> str:\n    return question.upper()\n")
    (folder / "evaluators.py").write_text(
        "def graded(output: str, expected: str) -> float:\n    return 1.0 if output == expected else 0.0\n"
    )
    (folder / "flows.py").write_text("raise ImportError('the user flows.py was imported as Assay code')\n")
    rows = [{"id": f"q{i}", "input": f"q{i}", "expected": f"Q{i}"} for i in range(N_ITEMS)]
    write_jsonl(folder / "data.jsonl", rows)
    return write_spec(
        folder,
        name="shadowing",
        dataset={"path": "data.jsonl", "id": "id"},
        target={"kind": "python", "function": "tasks:solve"},
        scorers=[{"kind": "user_code", "name": "graded", "function": "evaluators:graded"}],
        concurrency=2,
    )
