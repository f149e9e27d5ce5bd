"""A local Hugging Face Hub on uvicorn (FastAPI): the few routes `huggingface_hub` calls to read a
dataset repository, so tests point `HF_ENDPOINT` at 127.0.0.1 and never at the Hub:

    GET  /api/datasets/{owner}/{name}[/revision/{revision}]   the repository at a revision: its
         commit (`sha`) and files (`siblings`) — `HfApi.dataset_info`, which `snapshot_download`
         calls to resolve a branch
    GET  /api/datasets/{owner}/{name}/tree/{revision}          the commit's files — `list_repo_tree`
    HEAD /datasets/{owner}/{name}/resolve/{revision}/{path}    a file's commit (`X-Repo-Commit`),
    GET  (the same)                                            `ETag` and size; then its bytes

An unknown repository, revision or file is answered 404 with the `X-Error-Code` the Hub sends
(`RepoNotFound`, `RevisionNotFound`, `EntryNotFound`), which huggingface_hub turns into its own
errors. Revisions are URL-quoted in paths (`refs%2Fconvert%2Fparquet`), so routes are matched on the
raw path. Repositories live in memory: `commit(repo, files, branch)` makes a commit and moves the
branch to it, as a push does. FastAPI and uvicorn are the `dev` extra's: only tests import this.
"""

from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from assay.testing._background import HOST
from assay.testing._uvicorn import UvicornThread

_REPO = r"(?P<repo>[^/]+/[^/]+)"
_INFO = re.compile(rf"^/api/datasets/{_REPO}(?:/revision/(?P<revision>[^/]+))?$")
_TREE = re.compile(rf"^/api/datasets/{_REPO}/tree/(?P<revision>[^/]+)/?$")
_RESOLVE = re.compile(rf"^/datasets/{_REPO}/resolve/(?P<revision>[^/]+)/(?P<path>.+)$")


def _blob_id(data: bytes) -> str:
    """The file's git blob id, as the Hub gives a file that is not in LFS for its ETag and oid."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


@dataclass
class HubRepo:
    """One dataset repository: its commits (each the whole tree) and where its branches point."""

    commits: dict[str, dict[str, bytes]] = field(default_factory=dict)
    branches: dict[str, str] = field(default_factory=dict)

    def resolve(self, revision: str) -> str | None:
        """The commit a branch or commit id names, or None."""
        if revision in self.branches:
            return self.branches[revision]
        return revision if revision in self.commits else None


class LocalHub(UvicornThread):
    """The local Hub on uvicorn in a daemon thread; a context manager.

    Attributes:
        repos: the dataset repositories by `owner/name`.
        requests: every request received, in order, as (method, raw path).
        authorizations: the `Authorization` header of every request that had one.
    """

    thread_name = "local-hub"

    def __init__(self) -> None:
        self.repos: dict[str, HubRepo] = {}
        self.requests: list[tuple[str, str]] = []
        self.authorizations: list[str] = []
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:<port>`, what `HF_ENDPOINT` is set to."""
        if self.port is None:
            raise RuntimeError("the local Hub is not running")
        return f"http://{HOST}:{self.port}"

    def commit(self, repo: str, files: dict[str, bytes | str], branch: str = "main") -> str:
        """Commit `files` (the whole tree: path -> content) to `repo` (made if new) and move
        `branch` to the commit; returns its id (40 hex digits)."""
        tree = {path: data.encode() if isinstance(data, str) else data for path, data in files.items()}
        with self._lock:
            hub_repo = self.repos.setdefault(repo, HubRepo())
            parent = hub_repo.branches.get(branch, "")
            listing = "".join(f"{path}\0{_blob_id(data)}\n" for path, data in sorted(tree.items()))
            sha = hashlib.sha1(f"{parent}\n{listing}".encode(), usedforsecurity=False).hexdigest()
            hub_repo.commits[sha] = tree
            hub_repo.branches[branch] = sha
        return sha

    def reset(self) -> None:
        """Forget every repository and request."""
        with self._lock:
            self.repos.clear()
            self.requests.clear()
            self.authorizations.clear()

    def app(self) -> FastAPI:
        app = FastAPI()

        @app.api_route("/{anything:path}", methods=["GET", "HEAD"])
        async def route(request: Request) -> Response:
            raw = request.scope["raw_path"].decode()
            with self._lock:
                self.requests.append((request.method, raw))
                if "authorization" in request.headers:
                    self.authorizations.append(request.headers["authorization"])
                return self._answer(request.method, raw)

        return app

    def _answer(self, method: str, raw: str) -> Response:
        for pattern, answer in ((_INFO, self._info), (_TREE, self._tree), (_RESOLVE, self._resolve)):
            match = pattern.match(raw)
            if match is None:
                continue
            parts = {key: unquote(value) for key, value in match.groupdict().items() if value is not None}
            repo = self.repos.get(parts["repo"])
            if repo is None:
                return _not_found("RepoNotFound", "Repository not found")
            sha = repo.resolve(parts.get("revision", "main"))
            if sha is None:
                return _not_found("RevisionNotFound", "Invalid rev id")
            return answer(method, parts, sha, repo.commits[sha])
        return _not_found("", "Not Found")

    def _info(self, method: str, parts: dict[str, str], sha: str, tree: dict[str, bytes]) -> Response:
        return JSONResponse(
            {
                "_id": parts["repo"],
                "id": parts["repo"],
                "author": parts["repo"].split("/")[0],
                "sha": sha,
                "private": False,
                "gated": False,
                "disabled": False,
                "tags": [],
                "siblings": [{"rfilename": path} for path in sorted(tree)],
            }
        )

    def _tree(self, method: str, parts: dict[str, str], sha: str, tree: dict[str, bytes]) -> Response:
        return JSONResponse(
            [
                {"type": "file", "path": path, "size": len(data), "oid": _blob_id(data)}
                for path, data in sorted(tree.items())
            ]
        )

    def _resolve(self, method: str, parts: dict[str, str], sha: str, tree: dict[str, bytes]) -> Response:
        data = tree.get(parts["path"])
        if data is None:
            return _not_found("EntryNotFound", "Entry not found")
        headers = {"X-Repo-Commit": sha, "ETag": f'"{_blob_id(data)}"', "Accept-Ranges": "bytes"}
        if method == "HEAD":
            return Response(headers={**headers, "Content-Length": str(len(data))})
        return Response(content=data, headers=headers, media_type="application/octet-stream")


def _not_found(code: str, message: str) -> Response:
    headers: dict[str, Any] = {"X-Error-Message": message}
    if code:
        headers["X-Error-Code"] = code
    return JSONResponse({"error": message}, status_code=404, headers=headers)
