"""`assay view` served by uvicorn (its own process, on 127.0.0.1) and driven in Debian's Chromium:
each page opens, the runs filter, two runs are compared, two cells of a matrix are picked and
compared, the items page filters and pages through htmx, an item opens; nothing is logged as an error, no dialog opens (no stored string runs), and
no request leaves 127.0.0.1. Three items are labelled with the keyboard and read back from the
store."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import pytest

from assay.analysis.labelling import sample_tasks
from assay.store import Store
from assay.store.labels import read_labels
from tests.report.test_report import browser  # noqa: F401  (a fixture)
from tests.view.conftest import SCRIPT, WORSE, N
from tests.view.test_cells import matrix  # noqa: F401  (a fixture)

pytestmark = [pytest.mark.browser]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module", autouse=True)
def _stores_first(view_runs, matrix) -> None:  # noqa: F811
    """Both stores, built before Chromium starts: Playwright's sync API runs an event loop in
    this thread, beside which `assay run` (its own loop) cannot run."""


@contextmanager
def serving(store: str) -> Iterator[str]:
    """`assay view` over `store` in its own process on a free port of 127.0.0.1: its base URL."""
    port = _free_port()
    env = {**os.environ, "DO_NOT_TRACK": "1"}
    env.pop("ASSAY_VIEW_TOKEN", None)
    process = subprocess.Popen(
        [sys.executable, "-m", "assay.cli", "view", "--store", store, "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(url + "/static/view.css", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
            assert time.monotonic() < deadline, "assay view did not answer in 30 s"
            time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def served(view_runs) -> Iterator[str]:
    with serving(view_runs["store"]) as url:
        yield url


class Tab:
    """A page of the view in Chromium, recording errors, dialogs and every request elsewhere."""

    def __init__(self, browser, url: str) -> None:  # noqa: F811
        self.base = url
        self.context = browser.new_context(viewport={"width": 1400, "height": 1000})
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.elsewhere: list[str] = []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))

    def _route(self, route) -> None:
        if route.request.url.startswith(self.base + "/"):
            route.continue_()
        else:
            self.elsewhere.append(route.request.url)
            route.abort()

    def check(self) -> None:
        assert self.errors == [] and self.dialogs == [] and self.elsewhere == []


def test_the_view_in_chromium(served, view_runs, browser):  # noqa: F811
    base, cand = view_runs["base"], view_runs["cand"]
    tab = Tab(browser, served)
    page = tab.page
    try:
        page.goto(served + "/")
        assert page.locator("tr[data-run]").count() == 2
        page.fill("#run-filters input[name=text]", "view-cand")
        page.click("#run-filters button")
        page.wait_for_url("**/?text=view-cand*")
        assert page.locator("tr[data-run]").count() == 1

        page.goto(served + "/")
        page.check(f'tr[data-run="{base}"] input[name=a]')
        page.check(f'tr[data-run="{cand}"] input[name=b]')
        page.click("#compare-form button")
        page.wait_for_selector("#fig-forest .main-svg")
        assert page.text_content("#n-changed") == str(len(WORSE) + 1)
        assert page.locator("tr.flip").count() == len(WORSE) + 1
        assert page.locator(".diff .ins").count() > 0

        page.goto(f"{served}/runs/{cand}")
        page.wait_for_function("() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= 2")

        page.goto(f"{served}/runs/{cand}/items")
        assert page.text_content("#matched") == str(N)
        page.select_option("#item-filters select[name=outcome]", "failed")
        page.wait_for_function("() => document.querySelector('#matched')?.textContent === '1'")
        assert "outcome=failed" in page.url  # the state is the URL
        page.select_option("#item-filters select[name=outcome]", "")
        page.wait_for_function(f"() => document.querySelector('#matched')?.textContent === '{N}'")
        page.click("#next")
        page.wait_for_function(f"() => document.querySelectorAll('tr.item-row').length === {N - 50}")
        assert "page=1" in page.url

        page.goto(f"{served}/runs/{cand}/items?sort=score:judge")
        page.locator("a.item-link", has_text=SCRIPT).click()
        page.wait_for_selector("#item-id")
        assert page.text_content("#item-id") == SCRIPT and page.text_content("#output") == SCRIPT
        assert page.locator("img").count() == 0  # the stored <img> is text
        tab.check()
    finally:
        tab.context.close()


def test_labelling_three_items_with_the_keyboard(served, view_runs, browser):  # noqa: F811
    # The base run: the in-process labelling tests label copies of the candidate.
    run = view_runs["base"]
    tab = Tab(browser, served)
    page = tab.page

    def at(task: int) -> None:
        # `?.`: while htmx swaps the task in, the element is absent for a moment (a throwing
        # predicate ends the wait at once). Then until htmx has settled the swap: a key pressed
        # before that can land on the content being replaced (a person is slower than this).
        page.wait_for_function(f"() => document.querySelector('#task-number')?.textContent === '{task}'")
        page.wait_for_function(
            "() => !document.querySelector('.htmx-request, .htmx-swapping, .htmx-settling, .htmx-added')"
        )

    try:
        page.goto(f"{served}/runs/{run}/labels?scorer=judge&n=5&seed=2&labeller=chromium")
        assert page.is_visible("#judge-score") and page.is_visible("#no-agreement")
        page.keyboard.press("1")
        at(2)
        assert "i=1" in page.url and page.text_content("#n-labelled") == "1"
        page.keyboard.press("t")
        page.wait_for_function("() => document.activeElement?.id === 'note'")
        page.keyboard.type("unsure: n and 1 typed here are text")
        page.keyboard.press("Escape")
        page.keyboard.press("0")
        at(3)
        page.keyboard.press("s")
        at(4)
        page.keyboard.press("1")
        at(5)
        assert page.text_content("#n-labelled") == "3" and page.text_content("#labelled-count") == "3"
        page.keyboard.press("p")
        at(4)
        assert page.text_content("#current-value") == "1.000"
        tab.check()
    finally:
        tab.context.close()
    tasks = sample_tasks(Store(view_runs["store"]), run, "judge", n=5, seed=2)
    labels = read_labels(Store(view_runs["store"]), run).sort("labelled_at")
    assert [(r["item_id"], r["value"], r["note"]) for r in labels.to_dicts()] == [
        (tasks[0]["item_id"], 1.0, None),
        (tasks[1]["item_id"], 0.0, "unsure: n and 1 typed here are text"),
        (tasks[3]["item_id"], 1.0, None),
    ]
    assert set(labels["labeller"]) == {"chromium"}


def test_picking_two_cells_of_a_matrix(matrix, browser):  # noqa: F811
    with serving(matrix["store"]) as served:
        tab = Tab(browser, served)
        page = tab.page
        try:
            page.goto(served + "/")
            page.click(f'tr[data-run="{matrix["sloppy"]}"] a.compare-cells')
            page.wait_for_selector("#cell-picker")
            assert page.locator("#cell-picker tr.cell").count() == 3
            page.check(f'#cell-picker tr[data-run="{matrix["awful"]}"] input[name=b]')
            page.click("#cell-picker button")
            page.wait_for_selector("#fig-forest .main-svg")
            assert f"matrix={matrix['matrix']}" in page.url and f"b={matrix['awful']}" in page.url
            assert page.text_content("#n-changed") == "10"
            # Another pair, from the picker above the comparison.
            page.check(f'#cell-picker tr[data-run="{matrix["perfect"]}"] input[name=a]')
            page.click("#cell-picker button")
            page.wait_for_url(f"**a={matrix['perfect']}*")
            page.wait_for_selector("#fig-forest .main-svg")
            assert page.text_content("#n-changed") == "20"  # awful misses every even item
            tab.check()
        finally:
            tab.context.close()
