"""Workspace diffs on the item page, kept through the real store by an http_agent run against the
reference harness (the agent leaves a `diff.patch`, a `*.patch` or a `*.diff` among its files):
the page shows each one's lines marked added and removed, a `<script>` in the diff as text, a big
one cut with how much was left out, an empty one as such, and a note for one gone from the store
or unreadable (never a 500). On an `s3://` store (moto) the diffs are read from the bucket. A
Docker run shows a container target's own `diff.patch`."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from markupsafe import escape

from assay.store import Store
from assay.testing.harness import HarnessServer
from assay.view.diffs import DIFF_BYTES
from tests.conftest import write_jsonl, write_spec
from tests.helpers.cli import assay_json, assay_process_json
from tests.report.test_report import browser  # noqa: F401  (a fixture)
from tests.view.conftest import SCRIPT, client

# The agent's added line holds HTML and a script.
ADDED = f'+print("{SCRIPT}")'
PATCH = f"""diff --git a/app.py b/app.py
--- a/app.py
+++ b/app.py
@@ -1,2 +1,2 @@
 import os
-print("old")
{ADDED}
"""
# About 300 KB of added lines, numbered: the page shows the first 200 KB of whole lines.
BIG_LINES = 12_000
BIG = "--- /dev/null\n+++ b/big.txt\n@@ -0,0 +1,12000 @@\n" + "".join(
    f"+line {i:05d} of the generated file\n" for i in range(BIG_LINES)
)


@pytest.fixture
def harness() -> Iterator[HarnessServer]:
    with HarnessServer() as server:
        yield server


def _agent_run(
    harness: HarnessServer, folder: Path, store: str, capsys, *, own_process: bool = False
) -> tuple[str, dict[str, list[str]]]:
    """A run of five items whose agent leaves diffs: `small` a `diff.patch` (and a text file
    that is no diff), `big` a `big.patch`, `gone` a `change.diff`, `odd` an `odd.patch`, `empty`
    an empty `diff.patch` (nothing changed). Returns the run id and each
    item's kept files. `own_process`: `assay run` in a subprocess (beside Playwright's event loop)."""
    harness.configure(
        behaviors={
            "small": {
                "artifacts": [{"path": "diff.patch"}, {"path": "notes.txt"}],
                "files": {"diff.patch": PATCH, "notes.txt": "+not a diff line\n"},
            },
            "big": {"artifacts": [{"path": "big.patch"}], "files": {"big.patch": BIG}},
            "gone": {"artifacts": [{"path": "change.diff"}], "files": {"change.diff": PATCH}},
            "odd": {"artifacts": [{"path": "odd.patch"}], "files": {"odd.patch": PATCH}},
            "empty": {"artifacts": [{"path": "diff.patch"}], "files": {"diff.patch": ""}},
        }
    )
    write_jsonl(folder / "d.jsonl", [{"id": i, "input": i} for i in ("small", "big", "gone", "odd", "empty")])
    spec = write_spec(
        folder,
        name="agent-diffs",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "http_agent", "base_url": harness.base_url, "poll_interval": 0.01},
        scorers=[{"kind": "includes", "name": "echo", "value": "a"}],
    )
    args = ("run", str(spec), "--store", store)
    run_id = (assay_process_json(*args) if own_process else assay_json(capsys, *args))["run_id"]
    kept = {r["item_id"]: r["artifacts"] for r in Store(store).run_items(run_id).iter_rows(named=True)}
    return run_id, kept


def _shows_the_big_one_cut(page: str) -> None:
    """The big diff's first 200 KB of whole lines, in order, and how many bytes were left out."""
    (cut,) = _diffs(page)
    lines = re.findall(r'<span class="p-add">\+line (\d{5}) ', cut)
    assert 0 < len(lines) < BIG_LINES and lines == [f"{i:05d}" for i in range(len(lines))]
    left = int(re.search(r"(\d+) more bytes not shown", cut)[1])
    assert left == len(BIG.encode()) - len(BIG.encode()[:DIFF_BYTES].rsplit(b"\n", 1)[0]) - 1
    assert f"(of {len(BIG.encode())})" in cut


def _diffs(page: str) -> list[str]:
    return re.findall(r'<details class="workspace-diff">.*?</details>', page, re.DOTALL)


def test_the_item_page_shows_its_workspace_diffs(harness, tmp_path, capsys):
    store = str(tmp_path / "store")
    run_id, kept = _agent_run(harness, tmp_path, store, capsys)
    # One diff deleted from the store, another replaced by a folder: neither can be read.
    kept_root = Path(Store(store).artifacts_root)
    (kept_root / kept["gone"][0]).unlink()
    (kept_root / kept["odd"][0]).unlink()
    (kept_root / kept["odd"][0]).mkdir()
    with client(store) as http:
        small, big, missing, odd, empty = (
            http.get(f"/runs/{run_id}/item", params={"id": item, "trial": "0"})
            for item in ("small", "big", "gone", "odd", "empty")
        )

    assert small.status_code == 200, small.text[:500]
    (shown,) = _diffs(small.text)  # notes.txt is a kept file, not a diff
    assert str(escape(kept["small"][0])) in shown and "+1</span>" in shown and "−1</span>" in shown
    assert '<span class="p-file">+++ b/app.py</span>' in shown
    assert '<span class="p-del">-print(&#34;old&#34;)</span>' in shown
    # The diff's script is text on the page, never markup.
    assert SCRIPT not in small.text
    assert f'<span class="p-add">{escape(ADDED)}</span>' in shown

    _shows_the_big_one_cut(big.text)

    assert missing.status_code == 200, missing.text[:500]
    (note,) = _diffs(missing.text)
    assert "not in the store any more" in note and "<pre" not in note
    assert odd.status_code == 200, odd.text[:500]
    (note,) = _diffs(odd.text)
    assert "could not be read (IsADirectoryError)" in note and "<pre" not in note
    (nothing,) = _diffs(empty.text)
    assert "empty: nothing changed" in nothing and "0 bytes" in nothing


def test_an_s3_store_shows_the_diff_from_the_bucket(harness, s3, request, tmp_path, capsys):
    """The same diffs read from the bucket: the big one's head only (one GET, its body dropped
    after the first chunk), the empty one without a ranged GET (which S3 answers 416)."""
    url = s3.url(request.node.name)
    run_id, _ = _agent_run(harness, tmp_path, url, capsys)
    with client(url) as http:
        small, big, empty = (
            http.get(f"/runs/{run_id}/item", params={"id": item, "trial": "0"})
            for item in ("small", "big", "empty")
        )
    assert small.status_code == 200, small.text[:500]
    (shown,) = _diffs(small.text)
    assert '<span class="p-del">-print(&#34;old&#34;)</span>' in shown and SCRIPT not in small.text
    _shows_the_big_one_cut(big.text)
    assert "empty: nothing changed" in empty.text


@pytest.mark.docker
def test_a_container_runs_workspace_diff_shows_on_its_item_page(tmp_path, capsys):
    """End to end: a container target's agent edits, adds and removes files in a fresh busybox
    container; the `diff.patch` the target keeps is on the item's page, marked and escaped."""
    from tests.helpers.sandbox_images import busybox_image, engine
    from tests.sandbox.test_sandbox import _eval

    command = "echo two >> src/code.txt; echo '<b>bold</b>' > page.html; rm readme.txt; echo 42"
    spec = _eval(tmp_path, busybox_image(engine()), command)
    store = str(tmp_path / "store")
    run_id = assay_json(capsys, "run", str(spec), "--store", store)["run_id"]
    with client(store) as http:
        page = http.get(f"/runs/{run_id}/item", params={"id": "a", "trial": "0"})
    assert page.status_code == 200, page.text[:500]
    (shown,) = _diffs(page.text)
    assert f"<code>run_id={run_id}/a/0/diff.patch</code>" in shown
    assert "+2</span>" in shown and "−1</span>" in shown
    assert '<span class="p-file">+++ b/src/code.txt</span>' in shown
    assert '<span class="p-ctx"> line two</span>\n<span class="p-add">+two</span>' in shown
    assert '<span class="p-add">+&lt;b&gt;bold&lt;/b&gt;</span>' in shown and "<b>bold</b>" not in page.text
    assert (
        '<span class="p-file">--- a/readme.txt</span>' in shown
        and '<span class="p-del">-the task</span>' in shown
    )


@pytest.mark.browser
def test_a_diff_opens_in_chromium_as_text(harness, tmp_path, capsys, browser):  # noqa: F811
    """In Debian's Chromium: the folded diff opens on a click, its lines show (the script in it
    as text: no dialog), and nothing is logged as an error or fetched from elsewhere."""
    from tests.view.test_view_browser import Tab, serving

    store = str(tmp_path / "store")
    run_id, _ = _agent_run(harness, tmp_path, store, capsys, own_process=True)
    with serving(store) as url:
        tab = Tab(browser, url)
        tab.page.goto(f"{url}/runs/{run_id}/item?id=small&trial=0")
        added = tab.page.locator(".workspace-diff .patch .p-add")
        assert not added.is_visible()
        tab.page.locator(".workspace-diff summary").click()
        assert added.inner_text() == ADDED
        assert added.evaluate("e => getComputedStyle(e).backgroundColor") != "rgba(0, 0, 0, 0)"
        tab.page.screenshot(path=str(tmp_path / "diff.png"), full_page=True)
        tab.check()
        tab.context.close()
