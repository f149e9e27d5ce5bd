"""Hugging Face datasets: a repository's revision resolved to its commit, and the files of a
config's split downloaded into the Hugging Face cache by `huggingface_hub` — imported here only,
when a spec names `dataset.hf`, so a run over a local file never loads it.

    parse_hf_path   `hf://datasets/owner/name[@revision][/path]` -> repository, revision, path
    hub_files       the commit and the cached files a dataset spec's `hf` reads
    split_files     which of a repository's files are a config's split, as the Hub lays them out

Which files a split is (the Hub's "manual configuration" and "file names and splits" pages):
1. the README's `configs:` — each config's `data_files`, a glob or a list of `{split, path}`;
2. else the parquet conversion's layout (`refs/convert/parquet`): `<config>/<split>/NNNN.parquet`;
3. else one config, `default`, whose splits the files' names say: `data/<split>-NNNNN-of-NNNNN.*`
   (what `push_to_hub` writes), or a folder or file-name word `train`/`training`,
   `validation`/`valid`/`val`/`dev`, `test`/`testing`/`eval`/`evaluation`; when no file names a
   split, every file is `train`.

`HF_HUB_OFFLINE=1` reads the cache (`HF_HOME`, `HF_HUB_CACHE`) only: the commit a branch named
there last (`refs/`) and the listing of that commit's files kept beside it. `HF_TOKEN` is read by
huggingface_hub alone; nothing here sees or says it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from assay.errors import DatasetError

DATA_SUFFIXES = (".parquet", ".pq", ".jsonl", ".ndjson", ".csv")
_NOT_DATA = re.compile(r"(^|/)\.|\.(md|py|txt|gitattributes|lock|yaml|yml)$", re.IGNORECASE)
_SPLIT_WORDS = {
    "train": ("train", "training"),
    "validation": ("validation", "valid", "val", "dev"),
    "test": ("test", "testing", "eval", "evaluation"),
}
_SHARDED = re.compile(r"^data/(?P<split>\w+?)-\d{5}-of-\d{5}[^/]*$")
_WORD_BREAK = re.compile(r"[-._ 0-9]+")
_INSTALL = "reading a Hugging Face dataset needs huggingface_hub: pip install 'assay[hf]'"


def parse_hf_path(uri: str) -> tuple[str, str | None, str]:
    """The repository, revision (None: the default branch) and path in the repository of an
    `hf://datasets/...` path, parsed by huggingface_hub's own parser; raises ValueError."""
    try:
        from huggingface_hub import parse_hf_uri
    except ImportError:
        raise ValueError(f"dataset.path: {_INSTALL}") from None
    try:
        parsed = parse_hf_uri(uri)
    except ValueError as exc:
        raise ValueError(f"dataset.path: {exc}") from None
    if parsed.type != "dataset":
        raise ValueError(
            f"dataset.path: {uri!r} names a {parsed.type}, not a dataset: use hf://datasets/owner/name/..."
        )
    return parsed.id, parsed.revision, parsed.path_in_repo


@dataclass(frozen=True, slots=True)
class HubFiles:
    """What a Hugging Face dataset spec reads.

    Args:
        commit: the commit the revision named (40 hex digits).
        files: the files read, in the cache, in the repository's order.
    """

    commit: str
    files: list[Path]


@dataclass(frozen=True, slots=True)
class HubDataset:
    """What a spec's `dataset` names in a repository (`DatasetSpec`'s fields of those names)."""

    hf: str
    revision: str | None = None
    config: str | None = None
    split: str | None = None
    path: str | None = None


def hub_files(spec: HubDataset) -> HubFiles:
    """Resolve `spec.revision` to its commit and download (or, offline, find in the cache) the
    files of the spec's split or `path`; raises `DatasetError` naming the field."""
    try:
        from huggingface_hub import constants, errors, snapshot_download
    except ImportError:
        raise DatasetError(f"dataset.hf: {_INSTALL}") from None
    repo = spec.hf
    # Offline, said outright: given a commit whose file listing is cached, huggingface_hub would
    # otherwise go on to ask the Hub for each file, and fail with a less helpful error.
    options: dict[str, Any] = {"repo_type": "dataset", "local_files_only": constants.is_offline_mode()}
    options["tqdm_class"] = _quiet_bar()
    try:
        # README.md first: it holds the configs; the call resolves the revision (and keeps the
        # branch's commit and its file listing in the cache, for offline runs).
        root = Path(snapshot_download(repo, revision=spec.revision, allow_patterns=["README.md"], **options))
        commit = root.name
        names = _listing(repo, commit, root)
        chosen = _chosen(spec, names, _card(root / "README.md"), commit)
        root = Path(snapshot_download(repo, revision=commit, allow_patterns=chosen, **options))
    except errors.GatedRepoError:
        raise DatasetError(
            f"dataset.hf: {repo!r} is gated: accept its terms on the Hub, and set HF_TOKEN"
        ) from None
    except errors.RepositoryNotFoundError:
        raise DatasetError(
            f"dataset.hf: no dataset repository {repo!r} at {_endpoint()} (a private one needs HF_TOKEN)"
        ) from None
    except errors.RevisionNotFoundError:
        raise DatasetError(
            f"dataset.revision: {repo!r} has no branch, tag or commit {spec.revision!r}"
        ) from None
    except errors.LocalEntryNotFoundError as exc:
        raise DatasetError(_not_cached(spec, exc)) from None
    except errors.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "an error"
        raise DatasetError(f"dataset.hf: the Hub at {_endpoint()} answered {status} for {repo!r}") from None
    except errors.HFValidationError as exc:
        raise DatasetError(f"dataset.hf: {exc}") from None
    return HubFiles(commit=commit, files=[root / name for name in chosen])


def _quiet_bar() -> type:
    """A progress bar that shows nothing: a dataset's few files are no reason for one on stderr."""
    from huggingface_hub.utils import tqdm

    class Quiet(tqdm):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **{**kwargs, "disable": True})

    return Quiet


def _endpoint() -> str:
    from huggingface_hub import constants

    return constants.ENDPOINT


def _not_cached(spec: HubDataset, exc: Exception) -> str:
    from huggingface_hub import constants, errors

    revision = spec.revision or "main"
    if constants.is_offline_mode():
        what = (
            "copy of the files of this split"
            if isinstance(exc, errors.IncompleteSnapshotError)
            else "snapshot"
        )
        return (
            f"dataset.hf: HF_HUB_OFFLINE is set and the cache ({constants.HF_HUB_CACHE}) holds "
            f"no {what} of {spec.hf!r} at {revision!r}: run once online to download it"
        )
    return (
        f"dataset.hf: cannot reach the Hub at {_endpoint()} for {spec.hf!r}, and the cache "
        f"({constants.HF_HUB_CACHE}) holds no snapshot of it at {revision!r}"
    )


def _listing(repo: str, commit: str, root: Path) -> list[str]:
    """Every file of the commit, from the listing huggingface_hub keeps in the cache (online it
    has just fetched it); a cache filled without one lists what the snapshot folder holds."""
    from huggingface_hub import get_cached_repo_tree
    from huggingface_hub.errors import CachedRepoTreeNotFoundError

    try:
        return sorted(
            entry.path for entry in get_cached_repo_tree(repo, repo_type="dataset", revision=commit)
        )
    except CachedRepoTreeNotFoundError:
        return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def _card(readme: Path) -> dict[str, Any]:
    """The README's YAML header (the dataset card's metadata), or nothing."""
    if not readme.is_file():
        return {}
    from huggingface_hub.repocard import metadata_load

    try:
        return metadata_load(readme) or {}
    except ValueError as exc:  # YAML that does not parse
        raise DatasetError(
            f"dataset.hf: the repository's README.md has a header that is not YAML: {exc}"
        ) from None


def _chosen(spec: HubDataset, names: list[str], card: dict[str, Any], commit: str) -> list[str]:
    where = f"{spec.hf}@{commit[:12]}"
    if spec.path is None:
        chosen = split_files(names, card, spec.config, spec.split, where)
    else:
        chosen = _matching(names, [spec.path])
        if not chosen:
            raise DatasetError(f"dataset.path: no file in {where} matches {spec.path!r}")
    unreadable = sorted(
        {Path(name).suffix or name for name in chosen if not name.lower().endswith(DATA_SUFFIXES)}
    )
    if unreadable:
        raise DatasetError(
            f"dataset.{'path' if spec.path else 'split'}: {where}'s files are {', '.join(unreadable)}: "
            "Assay reads .parquet, .jsonl and .csv (the Hub's parquet conversion has every public "
            "dataset as Parquet: revision: refs/convert/parquet)"
        )
    return chosen


def _matching(names: list[str], patterns: list[str]) -> list[str]:
    from huggingface_hub.utils import filter_repo_objects

    return list(filter_repo_objects(names, allow_patterns=patterns))


def split_files(
    names: list[str], card: dict[str, Any], config: str | None, split: str | None, where: str
) -> list[str]:
    """The files of `config`'s `split` among a repository's `names` (None: the default config,
    the only split); raises `DatasetError` naming `dataset.config` or `dataset.split`."""
    configs, default = _layout(names, card)
    if config is None:
        config = default or (next(iter(configs)) if len(configs) == 1 else None)
        if config is None:
            raise DatasetError(
                f"dataset.config: {where} has configs {_listed(configs)} and no default: name one"
            )
    elif config not in configs:
        raise DatasetError(f"dataset.config: {where} has no config {config!r}; it has {_listed(configs)}")
    splits = configs[config]
    if not splits:
        raise DatasetError(f"dataset.config: config {config!r} of {where} has no data files")
    if split is None:
        if len(splits) > 1:
            raise DatasetError(f"dataset.split: {where} ({config}) has splits {_listed(splits)}: name one")
        split = next(iter(splits))
    elif split not in splits:
        raise DatasetError(
            f"dataset.split: {where} ({config}) has no split {split!r}; it has {_listed(splits)}"
        )
    return splits[split]


def _listed(names: Any) -> str:
    return ", ".join(repr(name) for name in sorted(names))


def _layout(names: list[str], card: dict[str, Any]) -> tuple[dict[str, dict[str, list[str]]], str | None]:
    """Each config's splits and their files, and the config marked default (if any)."""
    data = [name for name in names if not _NOT_DATA.search(name)]
    declared = card.get("configs")
    if isinstance(declared, list) and declared:
        configs: dict[str, dict[str, list[str]]] = {}
        default = None
        for entry in declared:
            if not isinstance(entry, dict):
                continue
            name = str(entry.get("config_name", "default"))
            configs[name] = {
                split: _matching(data, patterns)
                for split, patterns in _data_files(entry.get("data_files")).items()
            }
            if entry.get("default"):
                default = name
        return configs, default
    parts = [name.split("/") for name in data]
    if parts and all(len(p) == 3 and p[0] != "data" and p[2].endswith(".parquet") for p in parts):
        converted: dict[str, dict[str, list[str]]] = {}
        for (config, split, _), name in zip(parts, data, strict=True):
            converted.setdefault(config, {}).setdefault(split.removeprefix("partial-"), []).append(name)
        return converted, "default" if "default" in converted else None
    return {"default": _named_splits(data)}, "default"


def _data_files(value: Any) -> dict[str, list[str]]:
    """A config's `data_files` (a glob, a list of globs, or a list of `{split, path}`) by split."""
    if isinstance(value, str):
        return {"train": [value]}
    if isinstance(value, dict):
        return {str(k): [v] if isinstance(v, str) else list(v) for k, v in value.items()}
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return {"train": list(value)}
    splits: dict[str, list[str]] = {}
    for entry in value or []:
        if isinstance(entry, dict) and "path" in entry:
            path = entry["path"]
            splits.setdefault(str(entry.get("split", "train")), []).extend(
                [path] if isinstance(path, str) else path
            )
    return splits


def _named_splits(data: list[str]) -> dict[str, list[str]]:
    """The default config's splits, by what the files' names say (none: all `train`)."""
    splits: dict[str, list[str]] = {}
    for name in data:
        split = _split_named(name)
        if split is not None:
            splits.setdefault(split, []).append(name)
    return splits or ({"train": list(data)} if data else {})


def _split_named(name: str) -> str | None:
    sharded = _SHARDED.match(name)
    if sharded:
        return sharded["split"]
    *folders, file = name.lower().split("/")
    words = {word for word in _WORD_BREAK.split(file.rsplit(".", 1)[0]) if word}
    for split, keywords in _SPLIT_WORDS.items():
        if any(folder in keywords or _WORD_BREAK.split(folder)[0] in keywords for folder in folders):
            return split
        if words & set(keywords):
            return split
    return None
