"""The workspace diffs an item kept, as the item page shows them: each artifact named like a patch
(a container target's `diff.patch`, or any `*.patch` / `*.diff`) read through the store (local or
s3://), decoded, cut to a size a page can hold, and split into lines marked added, removed, hunk
or file header for the page's colours. Nothing here knows about HTTP or HTML: the template writes
each line through autoescape."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from assay.store import Store

# Bytes of one diff shown on the page: a 200 KB diff is ~5,000 lines, which the item page still
# renders well inside its 200 ms; past that a person reads the file itself (its path is shown).
DIFF_BYTES = 200 * 1024
# What an artifact's name ends with when it is a diff.
SUFFIXES = (".patch", ".diff")


@dataclass
class DiffLine:
    """One line of a shown diff.

    Args:
        kind: `add`, `del`, `hunk` (`@@ ...`), `file` (`diff`, `---`, `+++` headers) or `` (context).
        text: the line, without its line break.
    """

    kind: str
    text: str


@dataclass
class ShownDiff:
    """One diff artifact as the item page shows it.

    Args:
        path: the artifact's path, as `items.artifacts` holds it.
        lines: its first `DIFF_BYTES` (whole lines), marked; empty when it could not be read.
        size: its size in bytes (0 when it could not be read).
        cut: bytes left out past the cap (0 when it is shown whole).
        added: `+` lines among those shown (file headers not counted).
        removed: `-` lines among those shown.
        note: why nothing is shown (gone from the store, unreadable), or None.
    """

    path: str
    lines: list[DiffLine] = field(default_factory=list)
    size: int = 0
    cut: int = 0
    added: int = 0
    removed: int = 0
    note: str | None = None


def is_diff(path: str) -> bool:
    """Whether an artifact path names a diff (`diff.patch`, `*.patch`, `*.diff`)."""
    return path.rsplit("/", 1)[-1].lower().endswith(SUFFIXES)


_HUNK = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")


def marked(lines: list[str]) -> list[DiffLine]:
    """A unified diff's lines marked `file`, `hunk`, `add`, `del` or `` (context). Inside a hunk
    its header's line counts say where it ends, so a removed `-- x` or an added `++ y` line is
    content, not a file header; between hunks every line is a header (`diff`, `---`, `+++`, ...)."""
    out = []
    old = new = 0  # lines of the current hunk still to come, old side and new side
    for line in lines:
        # A hunk's content lines start with " ", "+", "-" or "\\": any other line ends it (a
        # diff whose counts are off, or cut), and a "@@" line always starts the next one.
        if line and line[0] not in " +-\\":
            old = new = 0
        hunk = _HUNK.match(line)
        if hunk:
            old, new = (int(n) if n is not None else 1 for n in hunk.groups())
            kind = "hunk"
        elif old <= 0 and new <= 0:
            kind = "" if line.startswith("\\") else "file"
        elif line.startswith("+"):
            new, kind = new - 1, "add"
        elif line.startswith("-"):
            old, kind = old - 1, "del"
        elif line.startswith("\\"):  # "\ No newline at end of file": counts on neither side
            kind = ""
        else:
            old, new, kind = old - 1, new - 1, ""
        out.append(DiffLine(kind, line))
    return out


def shown_diff(path: str, head: bytes, size: int, cap: int = DIFF_BYTES) -> ShownDiff:
    """A diff as the page shows it: its first `cap` bytes, cut back to the last whole line when
    the file is longer (a line longer than `cap` is cut where the cap falls), decoded with
    errors replaced.

    Args:
        path: the artifact's path, shown with it.
        head: its first bytes (at least `cap` of them, or all).
        size: its whole size in bytes.
        cap: the most bytes shown.
    """
    if size > len(head[:cap]):
        head = head[:cap]
        newline = head.rfind(b"\n")
        if newline > 0:
            head = head[: newline + 1]
    lines = marked(head.decode("utf-8", errors="replace").splitlines())
    return ShownDiff(
        path=path,
        lines=lines,
        size=size,
        cut=size - len(head),
        added=sum(line.kind == "add" for line in lines),
        removed=sum(line.kind == "del" for line in lines),
    )


def item_diffs(store: Store, artifacts: list[str]) -> list[ShownDiff]:
    """The diffs among an item's kept files, each read from the store no further than
    `DIFF_BYTES` (a diff has no size limit: an agent's generated file can make it any size); one
    that is gone or cannot be read has a note instead of lines.

    Args:
        store: the run's store.
        artifacts: the item row's `artifacts` (paths relative to the store's artifacts root).
    """
    shown = []
    for path in artifacts:
        if not is_diff(path):
            continue
        try:
            head, size = store.read_artifact_head(path, DIFF_BYTES)
        except FileNotFoundError:
            shown.append(ShownDiff(path=path, note="not in the store any more"))
            continue
        # One kept file must not fail the whole item page, whatever the store raises (a folder
        # named like a patch, a bucket that answers with an error). Only the error's type is
        # shown: an object store's message may hold its endpoint and request details.
        except Exception as exc:  # noqa: BLE001
            shown.append(ShownDiff(path=path, note=f"could not be read ({type(exc).__name__})"))
            continue
        shown.append(shown_diff(path, head, size))
    return shown
