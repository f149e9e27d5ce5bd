"""The opt-in response cache: a reply stored once is free ever after, across runs, in the store.

Keyed by the endpoint and the full request body (model, messages, temperature, seed …): any
change to what is asked is a different key. Entries are JSON files under `<store>/cache/`,
each written in one step through the store's location (a local folder or an object store). A hit is an operation that cost nothing (`operations_cached` counts them).

`cache: true` is refused unless the call's temperature is 0: a cached reply of a sampling model
would repeat one sample for ever. `cache: always` caches anyway.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from assay.store._location import Location


class ResponseCache:
    """Replies by request, as files under a key of the store.

    Args:
        location: the store's location.
        root: the key of the folder (`cache/responses`).
    """

    def __init__(self, location: Location, root: str = "cache/responses") -> None:
        self.location = location
        self.root = root

    @staticmethod
    def key(url: str, body: dict[str, Any]) -> str:
        canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(f"{url}\n{canonical}".encode()).hexdigest()

    def _path(self, key: str) -> str:
        return f"{self.root}/{key[:2]}/{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        try:
            return json.loads(self.location.read(self._path(key)))
        except (OSError, ValueError):
            return None

    def put(self, key: str, reply: dict[str, Any]) -> None:
        self.location.write(self._path(key), json.dumps(reply).encode())


def check_cache(cache: bool | str, temperature: float | None) -> None:
    """`cache: true` only at temperature 0: a cached sample of a sampling model would repeat for ever."""
    if cache is True and temperature != 0:
        raise ValueError(
            f"cache: true needs temperature: 0 (got {temperature}); a cached reply would repeat one sample "
            "of a sampling model. Use cache: always to cache anyway."
        )
