"""The docs cite files of this checkout: every path a doc names in backticks is there."""

from __future__ import annotations

import re

import pytest

from tests.conftest import REPO

DOCS = sorted([REPO / "README.md", *(REPO / "docs").glob("*.md")])
# A relative path with a folder and an extension; not a pattern, a placeholder or a URL.
CITED = re.compile(r"`((?:\.?[\w-]+/)+[\w.-]+\.(?:py|md|yaml|yml|toml|sh|json|jsonl|html\.j2|css|js))`")


def cited(doc) -> list[str]:
    return [path for path in CITED.findall(doc.read_text()) if not path.startswith(("~", "/"))]


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: doc.name)
def test_every_file_a_doc_cites_is_in_the_checkout(doc):
    missing = [path for path in cited(doc) if not (REPO / path).exists() and not (doc.parent / path).exists()]
    assert not missing, f"{doc.relative_to(REPO)} cites files that are not in the checkout: {missing}"


def test_the_docs_say_playwright_comes_with_the_dev_extra():
    """UI automation: the tests' browser library is installed by the extra the docs name."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(requirement.startswith("playwright") for requirement in extras["dev"])
    prefect_doc = (REPO / "docs/prefect.md").read_text()
    assert "Playwright" in prefect_doc and 'pip install -e ".[dev]"' in prefect_doc
    assert 'executable_path="/usr/bin/chromium"' in prefect_doc
    assert "Playwright" in (REPO / "docs/development.md").read_text()
