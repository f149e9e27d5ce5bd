"""`assay view` over an s3:// store (moto on 127.0.0.1) as its own process: the parts a page
reads are fetched from the bucket once and read from local copies after (`ASSAY_VIEW_CACHE_MB`),
or fetched again on every request when it is 0. Counted in the S3 server's own request log."""

from __future__ import annotations

import httpx
import pytest

from assay.store import Store
from tests.helpers.s3_requests import s3_requests
from tests.helpers.synthetic_runs import write_run
from tests.view.test_view_browser import serving


@pytest.mark.parametrize(("cache_mb", "copied"), [("2048", True), ("0", False)])
def test_a_pages_parts_are_fetched_once_unless_copies_are_off(s3, monkeypatch, request, cache_mb, copied):
    url = s3.url(request.node.name.replace("[", "-").replace("]", ""))
    write_run(Store(url), "a", 40, seed=1)
    monkeypatch.setenv("ASSAY_VIEW_CACHE_MB", cache_mb)
    page = "/runs/a/items?outcome=completed&scorer=judge&low=0&high=1"
    with serving(url) as base, s3_requests() as requests:
        first = httpx.get(base + page, timeout=30)
        assert first.status_code == 200 and "/runs/a/item?id=q1&amp;trial=0" in first.text
        fetched = requests.part_gets()
        parts = ["items/run_id=a/part-00000-bench.parquet", "scores/run_id=a/part-00000-bench.parquet"]
        assert sorted(set(fetched)) == parts
        if copied:
            assert fetched == parts  # each copied whole, in one GET
        again = httpx.get(base + page, timeout=30)
        assert again.text == first.text
        assert (requests.part_gets() == []) is copied


def test_a_page_lists_each_dataset_of_its_run_once(s3, request):
    """An item page reads its run's items in three queries (the item, its retries, its
    neighbours), its scores and its requests: on s3 each of those partitions, and the run's
    records, is listed once a request (`Store.same_listings`), not once a query."""
    url = s3.url(request.node.name)
    write_run(Store(url), "a", 40, seed=1)
    page = "/runs/a/item?id=q5&trial=0"
    with serving(url) as base, s3_requests() as requests:
        assert httpx.get(base + page, timeout=30).status_code == 200  # the parts copied
        requests.listed()
        answer = httpx.get(base + page, timeout=30)
        assert answer.status_code == 200 and "q5" in answer.text
        listed = requests.listed()
    assert sorted(listed) == ["items/run_id=a", "requests/run_id=a", "runs/run_id=a", "scores/run_id=a"]
