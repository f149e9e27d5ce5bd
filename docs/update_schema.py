"""Rewrite the column tables of docs/schema.md from `assay/_schema.py` (run after changing a schema).

    .venv/bin/python docs/update_schema.py

tests/test_store.py fails while the two disagree; this keeps the prose and replaces the tables.
"""

from __future__ import annotations

from pathlib import Path

from assay import _schema

DOC = Path(__file__).with_name("schema.md")
SECTIONS = {
    "runs": ("RUNS", "run_id", "the run's id (the hive partition key, `run_id=<id>` in the path)"),
    "items": ("ITEMS", "run_id", "the run's id (the hive partition key, `run_id=<id>` in the path)"),
    "scores": ("SCORES", "run_id", "the run's id (the hive partition key, `run_id=<id>` in the path)"),
    "requests": ("REQUESTS", "run_id", "the run's id (the hive partition key, `run_id=<id>` in the path)"),
    "turns": ("TURNS", "run_id", "the run's id (the hive partition key, `run_id=<id>` in the path)"),
    "comparisons": ("COMPARISONS", "comparison_id", "the comparison's id (the hive partition key)"),
    "leaderboards": ("LEADERBOARDS", "matrix_id", "the matrix's id (the hive partition key)"),
}


def table(schema_name: str, key: str, meaning: str) -> str:
    rows = ["| column | type | meaning |", "|---|---|---|", f"| `{key}` | `string` | {meaning} |"]
    for field in getattr(_schema, schema_name):
        text = field.metadata[b"description"].decode().replace("|", "\\|")
        rows.append(f"| `{field.name}` | `{field.type}` | {text} |")
    return "\n".join(rows)


def main() -> None:
    doc = DOC.read_text()
    for section, (schema_name, key, meaning) in SECTIONS.items():
        head = f"\n## {section}\n"
        if head not in doc:
            doc += f"{head}\n{table(schema_name, key, meaning)}\n"
            continue
        start = doc.index("| column | type | meaning |", doc.index(head))
        lines = doc[start:].split("\n")
        n = next(i for i, line in enumerate(lines) if not line.startswith("|"))
        doc = doc[:start] + table(schema_name, key, meaning) + doc[start + len("\n".join(lines[:n])) :]
    DOC.write_text(doc)


if __name__ == "__main__":
    main()
