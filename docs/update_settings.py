"""Rewrite the table of docs/settings.md from `assay/settings.py`'s model (run after changing it).

    .venv/bin/python docs/update_settings.py

tests/house/test_settings.py fails while the doc and the model disagree; this keeps the prose and
replaces the table between its markers.
"""

from __future__ import annotations

from pathlib import Path

from assay.settings import markdown

DOC = Path(__file__).with_name("settings.md")
BEGIN, END = "<!-- settings: begin (docs/update_settings.py) -->\n", "<!-- settings: end -->\n"


def updated(text: str) -> str:
    """`text` with the table between the markers replaced by the model's."""
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return f"{head}{BEGIN}{markdown()}{END}{tail}"


if __name__ == "__main__":
    DOC.write_text(updated(DOC.read_text(encoding="utf-8")), encoding="utf-8")
