"""What the view never does: run a stored string as markup, answer without its token when one is
set, show the token, or listen beyond loopback without one."""

from __future__ import annotations

import html

import pytest
from markupsafe import escape

from assay.cli import EXIT_INPUT
from assay.view import is_loopback
from tests.helpers.cli import assay_out
from tests.view.conftest import SCRIPT, client

TOKEN = "s3cret-view-token-for-tests"


def _pages(runs: dict[str, str]) -> list[tuple[str, dict[str, str]]]:
    base, cand = runs["base"], runs["cand"]
    return [
        ("/", {}),
        (f"/runs/{cand}", {}),
        (f"/runs/{cand}/items", {}),
        (f"/runs/{cand}/items", {"text": SCRIPT}),
        (f"/runs/{cand}/item", {"id": SCRIPT, "trial": "0"}),
        (f"/runs/{cand}/item", {"id": "q40", "trial": "0"}),
        ("/compare", {"a": base, "b": cand}),
    ]


def test_stored_html_shows_as_text_on_every_page(view_runs):
    """Ids, inputs, outputs, errors, explanations and tags hold `<script>` and an `onerror`
    image: every page shows them escaped, and nowhere as markup."""
    escaped = str(escape(SCRIPT))  # as Jinja2 writes it
    with client(view_runs["store"]) as http:
        for path, params in _pages(view_runs):
            page = http.get(path, params=params)
            assert page.status_code == 200, (path, page.text[:500])
            assert SCRIPT not in page.text, f"{path} {params} writes a stored string unescaped"
            assert "onerror=alert" not in page.text.replace(html.escape("onerror=alert"), "")
            assert escaped in page.text, f"{path} {params} does not show the stored string"
            assert "default-src 'none'" in page.headers["content-security-policy"]


def test_every_request_needs_the_token_when_one_is_set(view_runs):
    run = view_runs["cand"]
    with client(view_runs["store"], token=TOKEN) as http:
        for path in (
            "/",
            f"/runs/{run}",
            f"/runs/{run}/items",
            "/static/htmx.min.js",
            "/static/plotly.min.js",
        ):
            assert http.get(path).status_code == 401, path
            assert http.get(path, headers={"Authorization": "Bearer wrong"}).status_code == 401, path
            assert http.get(path, headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200, path
        http.cookies.set("assay_view_token", "wrong")
        assert http.get("/").status_code == 401
        http.cookies.clear()


def test_the_token_in_the_url_becomes_a_cookie_and_leaves_the_url(view_runs):
    run = view_runs["cand"]
    with client(view_runs["store"], token=TOKEN) as http:
        answer = http.get(
            f"/runs/{run}/items", params={"outcome": "failed", "token": TOKEN}, follow_redirects=False
        )
        assert answer.status_code == 303
        assert answer.headers["location"] == f"/runs/{run}/items?outcome=failed"
        cookie = answer.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie
        page = http.get(answer.headers["location"])  # the client keeps the cookie
        assert page.status_code == 200 and "q40" in page.text
        for path, params in _pages(view_runs):
            assert TOKEN not in http.get(path, params=params).text, f"{path} shows the token"


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.4.5", True),
        ("::1", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("10.0.0.2", False),
        ("example.org", False),
    ],
)
def test_loopback_hosts(host, loopback):
    assert is_loopback(host) is loopback


def test_a_host_beyond_loopback_without_a_token_is_refused(capsys, monkeypatch, tmp_path):
    monkeypatch.delenv("ASSAY_VIEW_TOKEN", raising=False)
    printed = assay_out(capsys, "view", "--host", "0.0.0.0", "--store", tmp_path / "s", code=EXIT_INPUT)
    assert "--host 0.0.0.0 is not loopback: set ASSAY_VIEW_TOKEN" in printed.err
