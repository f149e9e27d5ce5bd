"""What an S3 API server in this process (`assay.testing.s3.S3Server`, moto) was asked, read from
its own request log, while a `with s3_requests() as requests:` block runs."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import parse_qs

# A line of moto's (werkzeug's) request log: `"GET /bucket/key?query HTTP/1.1" 200`, the request
# coloured (ANSI escapes) when its status is not 200.
_REQUEST = re.compile(r'"(?:\x1b\[[0-9;]*m)*(?P<method>[A-Z]+) (?P<path>[^ ?]+)(?:\?(?P<query>[^ ]*))? HTTP/')


class S3Requests(logging.Handler):
    """The S3 server's requests, as its log names them."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[tuple[str, str]] = []
        self.queries: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if found := _REQUEST.search(record.getMessage()):
            self.lines.append((found["method"], found["path"]))
            self.queries.append(found["query"] or "")

    def listings(self) -> int:
        """The LIST requests since the last call."""
        # A LIST is a GET of the bucket itself (`/<bucket>?list-type=2&prefix=…`).
        count = sum(1 for method, path in self.lines if method == "GET" and path.count("/") == 1)
        self.lines.clear()
        self.queries.clear()
        return count

    def listed(self) -> list[str]:
        """The prefixes listed since the last call, below the store's root (`items/run_id=a`),
        in the order listed."""
        prefixes = []
        for (method, path), query in zip(self.lines, self.queries, strict=True):
            if method == "GET" and path.count("/") == 1:
                prefix = parse_qs(query).get("prefix", [""])[0]
                prefixes.append(prefix.split("/", 1)[-1].rstrip("/"))
        self.lines.clear()
        self.queries.clear()
        return prefixes

    def part_gets(self) -> list[str]:
        """The parts fetched (GET) since the last call, as `<dataset>/run_id=<id>/<file>`."""
        gets = ["/".join(path.split("/")[-3:]) for method, path in self.lines if method == "GET"]
        self.lines.clear()
        self.queries.clear()
        return sorted(name for name in gets if name.rsplit("/", 1)[-1].startswith("part-"))


@contextmanager
def s3_requests() -> Iterator[S3Requests]:
    """The requests the server gets while the block runs (its log raised to INFO meanwhile)."""
    log = logging.getLogger("werkzeug")
    level, handler = log.level, S3Requests()
    log.setLevel(logging.INFO)
    log.addHandler(handler)
    try:
        yield handler
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
