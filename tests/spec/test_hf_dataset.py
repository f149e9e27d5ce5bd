"""Hugging Face datasets (`dataset: {hf: owner/name, config, split, revision}` and `hf://` paths),
read by huggingface_hub from a local Hub on uvicorn (`assay.testing.hub`; `HF_ENDPOINT` points at
it) into a cache in the test's folder: never the network. huggingface_hub reads its settings as it
is imported, so every case that reads a dataset is a fresh `assay` process with its own
`HF_ENDPOINT`, `HF_HOME` and `HF_HUB_OFFLINE`, as a user's would be."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from assay.errors import DatasetError, SpecError
from assay.spec import parse_spec
from assay.spec._hub import split_files
from assay.store import Store
from assay.testing.hub import LocalHub
from tests.conftest import mock_target, only_run_id, run_assay, write_spec

REPO_ID = "assay-tests/arith"
TOKEN = "hf_test_token_never_stored_0123456789"
README = """---
configs:
- config_name: default
  default: true
  data_files:
  - split: train
    path: data/train.jsonl
  - split: test
    path: data/test-*.parquet
- config_name: hard
  data_files: hard/*.csv
---
# arith
"""


def _rows(start: int, n: int) -> list[dict[str, Any]]:
    return [
        {"id": f"q{i}", "question": f"What is {i} + {i}?", "answer": str(2 * i)}
        for i in range(start, start + n)
    ]


def _parquet(rows: list[dict[str, Any]]) -> bytes:
    buffer = io.BytesIO()
    pl.DataFrame(rows).write_parquet(buffer)
    return buffer.getvalue()


def _files(readme: str = README) -> dict[str, bytes | str]:
    """Two splits of the default config (JSONL and Parquet) and a `hard` config (CSV)."""
    return {
        "README.md": readme,
        ".gitattributes": "*.parquet filter=lfs diff=lfs merge=lfs -text\n",
        "data/train.jsonl": "".join(json.dumps(row) + "\n" for row in _rows(0, 3)),
        "data/test-00000-of-00001.parquet": _parquet(_rows(10, 4)),
        "hard/hard.csv": "id,question,answer\nh1,What is 50 + 50?,100\n",
    }


@pytest.fixture(scope="module")
def hub_server() -> Iterator[LocalHub]:
    with LocalHub() as hub:
        yield hub


@pytest.fixture
def hub(hub_server: LocalHub) -> LocalHub:
    hub_server.reset()
    hub_server.commit(REPO_ID, _files())
    return hub_server


def _env(hub: LocalHub, home: Path, **more: str) -> dict[str, str]:
    return {
        "HF_ENDPOINT": hub.endpoint,
        "HF_HOME": str(home),
        "HF_HUB_DISABLE_TELEMETRY": "1",
        "HF_TOKEN": TOKEN,
        "HF_HUB_OFFLINE": "0",
        **more,
    }


def _spec(folder: Path, base_url: str, dataset: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_spec(
        folder,
        name="arith-hf",
        dataset={"id": "id", "input": "question", "expected": "answer", **dataset},
        target=mock_target(base_url),
        scorers=[{"kind": "exact_match", "name": "exact"}],
        concurrency=2,
    )


def _run(spec: Path, store: Path, env: dict[str, str], *more: str) -> tuple[int, str, dict[str, Any] | None]:
    """`assay run`: its exit status, its stderr and the run's record (None when nothing was stored)."""
    done = run_assay("run", str(spec), "--store", str(store), "--quiet", *more, env=env)
    record = None
    if done.returncode in (0, 1) and (store / "runs").is_dir():
        record = Store(store).runs().sort("created_at").collect().to_dicts()[-1]
    return done.returncode, done.stdout + done.stderr, record


@pytest.mark.slow  # `assay run` processes: seconds each
def test_a_run_over_an_hf_split_pins_the_commit_it_read(tmp_path: Path, hub: LocalHub, mock: Any) -> None:
    """The quickstart's eval over the `test` split: the items are that split's rows, the record
    names the commit `main` pointed at, and HF_TOKEN went to the Hub but into nothing stored."""
    home, store = tmp_path / "hf", tmp_path / "store"
    spec = _spec(tmp_path / "spec", mock.base_url, {"hf": REPO_ID, "split": "test"})
    code, said, record = _run(spec, store, _env(hub, home))
    assert code == 0, said
    assert record is not None
    main = hub.repos[REPO_ID].branches["main"]
    assert record["dataset_revision"] == main
    assert json.loads(record["spec_json"])["dataset"]["revision"] == main
    items = Store(store).run_items(only_run_id(store))
    assert sorted(items["item_id"].to_list()) == ["q10", "q11", "q12", "q13"]
    assert set(items["outcome"].to_list()) == {"completed"}
    assert hub.authorizations and set(hub.authorizations) == {f"Bearer {TOKEN}"}
    assert TOKEN not in said
    assert not [p for p in store.rglob("*") if p.is_file() and TOKEN.encode() in p.read_bytes()]


@pytest.mark.slow  # `assay run` processes: seconds each
def test_a_moved_branch_is_a_new_identity_and_a_commit_stays(
    tmp_path: Path, hub: LocalHub, mock: Any
) -> None:
    """A push to `main` (the rows unchanged, the README edited) gives the next run a new commit and
    a new identity; `revision: <the first commit>` reads the first run's data, with its identity;
    a resume after the push refuses, saying how to name the commit."""
    env, store = _env(hub, tmp_path / "hf"), tmp_path / "store"
    on_main = _spec(tmp_path / "main", mock.base_url, {"hf": REPO_ID, "split": "train"})
    code, said, first = _run(on_main, store, env)
    assert code == 0 and first is not None, said
    first_commit = hub.repos[REPO_ID].branches["main"]
    second_commit = hub.commit(REPO_ID, _files(README + "\nEdited.\n"))

    code, said, second = _run(on_main, store, env)
    assert code == 0 and second is not None, said
    assert second["dataset_revision"] == second_commit != first_commit
    assert second["dataset_hash"] == first["dataset_hash"]  # the same rows ...
    assert second["identity"] != first["identity"]  # ... of another commit

    pinned = _spec(
        tmp_path / "pinned", mock.base_url, {"hf": REPO_ID, "split": "train", "revision": first_commit}
    )
    code, said, third = _run(pinned, store, env)
    assert code == 0 and third is not None, said
    assert third["dataset_revision"] == first_commit
    assert third["identity"] == first["identity"]

    resumed = run_assay("resume", first["run_id"], "--store", str(store), "--quiet", env=env)
    assert resumed.returncode == 2, resumed.stderr
    assert f"the dataset's revision ({first_commit} -> {second_commit}" in resumed.stderr
    assert f"`revision: {first_commit}`" in resumed.stderr


@pytest.mark.slow  # `assay run` processes: seconds each
def test_hf_paths_name_the_repository_revision_and_file(tmp_path: Path, hub: LocalHub, mock: Any) -> None:
    """`path: hf://datasets/owner/name@rev/file` reads that file at that revision (here a tag-like
    branch), not a local file of that name."""
    first = hub.repos[REPO_ID].branches["main"]
    hub.repos[REPO_ID].branches["v1"] = first
    hub.commit(REPO_ID, {**_files(), "data/train.jsonl": json.dumps(_rows(90, 1)[0]) + "\n"})
    spec = _spec(tmp_path / "spec", mock.base_url, {"path": f"hf://datasets/{REPO_ID}@v1/hard/hard.csv"})
    code, said, record = _run(spec, tmp_path / "store", _env(hub, tmp_path / "hf"))
    assert code == 0 and record is not None, said
    assert record["dataset_revision"] == first
    dataset = json.loads(record["spec_json"])["dataset"]
    assert (dataset["hf"], dataset["path"], dataset["revision"]) == (REPO_ID, "hard/hard.csv", first)
    items = Store(tmp_path / "store").run_items(record["run_id"])
    assert items["item_id"].to_list() == ["h1"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("dataset", "said"),
    [
        (
            {"hf": "assay-tests/missing", "split": "train"},
            "dataset.hf: no dataset repository 'assay-tests/missing'",
        ),
        ({"hf": REPO_ID, "split": "dev"}, "dataset.split: assay-tests/arith@"),
        ({"hf": REPO_ID}, "dataset.split: assay-tests/arith@"),
        ({"hf": REPO_ID, "config": "easy", "split": "train"}, "dataset.config: assay-tests/arith@"),
        ({"hf": REPO_ID, "split": "train", "revision": "v9"}, "dataset.revision: 'assay-tests/arith' has no"),
        ({"hf": REPO_ID, "path": "data/*.json"}, "dataset.path: no file in assay-tests/arith@"),
        (
            {"path": "hf://models/owner/name/x.jsonl"},
            "dataset.path: 'hf://models/owner/name/x.jsonl' names a model",
        ),
    ],
)
def test_bad_hf_input_exits_2_naming_the_field(
    tmp_path: Path, hub: LocalHub, mock: Any, dataset: dict[str, Any], said: str
) -> None:
    spec = _spec(tmp_path / "spec", mock.base_url, dataset)
    store = tmp_path / "store"
    code, output, _ = _run(spec, store, _env(hub, tmp_path / "hf"))
    assert code == 2, output
    assert said in output
    assert not store.exists()
    assert TOKEN not in output


@pytest.mark.slow  # `assay run` processes: seconds each
def test_offline_reads_the_cached_snapshot_and_says_when_there_is_none(
    tmp_path: Path, hub: LocalHub, mock: Any
) -> None:
    """HF_HUB_OFFLINE=1: a branch cached by an earlier run is read from the cache, at the commit it
    named then, without a request; an empty cache, or a split not cached, is an error naming the
    field (exit 2, nothing written)."""
    home, store = tmp_path / "hf", tmp_path / "store"
    spec = _spec(tmp_path / "spec", mock.base_url, {"hf": REPO_ID, "split": "test"})
    code, said, online = _run(spec, store, _env(hub, home))
    assert code == 0 and online is not None, said
    hub.commit(REPO_ID, _files(README + "\nMoved on.\n"))  # what the cache has not seen
    before = len(hub.requests)

    code, said, offline = _run(spec, store, _env(hub, home, HF_HUB_OFFLINE="1"))
    assert code == 0 and offline is not None, said
    assert len(hub.requests) == before
    assert offline["dataset_revision"] == online["dataset_revision"]
    assert offline["identity"] == online["identity"]

    other = _spec(tmp_path / "train", mock.base_url, {"hf": REPO_ID, "split": "train"})
    code, said, _ = _run(other, tmp_path / "store-train", _env(hub, home, HF_HUB_OFFLINE="1"))
    assert code == 2, said
    assert (
        "dataset.hf: HF_HUB_OFFLINE is set and the cache" in said
        and "holds no copy of the files of this split" in said
    )
    assert not (tmp_path / "store-train").exists()

    code, said, _ = _run(spec, tmp_path / "store-empty", _env(hub, tmp_path / "empty", HF_HUB_OFFLINE="1"))
    assert code == 2, said
    assert (
        f"dataset.hf: HF_HUB_OFFLINE is set and the cache ({tmp_path / 'empty' / 'hub'}) holds no snapshot"
        in said
    )
    assert not (tmp_path / "store-empty").exists()
    assert len(hub.requests) == before


@pytest.mark.parametrize(
    ("names", "card", "config", "split", "expected"),
    [
        # The README's configs: a glob per split, or one glob for `train`.
        (
            list(_files()),
            {"configs": [{"config_name": "hard", "data_files": "hard/*.csv"}]},
            None,
            None,
            ["hard/hard.csv"],
        ),
        # The parquet conversion: <config>/<split>/NNNN.parquet (`partial-` when cut short).
        (
            ["default/train/0000.parquet", "default/partial-test/0000.parquet", "b/train/0000.parquet"],
            {},
            None,
            "test",
            ["default/partial-test/0000.parquet"],
        ),
        (
            ["default/train/0000.parquet", "b/train/0000.parquet", "b/train/0001.parquet"],
            {},
            "b",
            None,
            ["b/train/0000.parquet", "b/train/0001.parquet"],
        ),
        # The Hub's split names: push_to_hub's shards (any name), folders and file-name words.
        (
            ["README.md", "data/few_shot-00000-of-00001.parquet", "data/train-00000-of-00002.parquet"],
            {},
            None,
            "few_shot",
            ["data/few_shot-00000-of-00001.parquet"],
        ),
        (["valid/a.jsonl", "train/a.jsonl", "my_eval.csv"], {}, None, "validation", ["valid/a.jsonl"]),
        (["valid/a.jsonl", "train/a.jsonl", "my_eval.csv"], {}, None, "test", ["my_eval.csv"]),
        # No file names a split: all are `train`.
        (["rows.jsonl", "more.jsonl", "README.md"], {}, None, None, ["more.jsonl", "rows.jsonl"]),
    ],
)
def test_splits_follow_the_hubs_layout(
    names: list[str], card: dict[str, Any], config: str | None, split: str | None, expected: list[str]
) -> None:
    assert sorted(split_files(sorted(names), card, config, split, "o/n@abc")) == expected


def test_a_split_or_config_the_layout_lacks_is_named() -> None:
    with pytest.raises(
        DatasetError, match=r"dataset\.split: o/n@abc \(default\) has splits 'test', 'train': name one"
    ):
        split_files(["train.csv", "test.csv"], {}, None, None, "o/n@abc")
    with pytest.raises(DatasetError, match=r"dataset\.config: o/n@abc has configs 'a', 'b' and no default"):
        split_files(["a/train/0.parquet", "b/train/0.parquet"], {}, None, None, "o/n@abc")


@pytest.mark.parametrize(
    ("dataset", "said"),
    [
        ({"input": "q"}, "dataset: give `path` (a file) or `hf`"),
        ({"path": "d.jsonl", "split": "test"}, "dataset.split: only a Hugging Face dataset"),
        ({"hf": "o/n", "path": "x.csv", "split": "test"}, "dataset.path: with `hf` it names"),
        (
            {"path": "hf://datasets/o/n@v1/x.csv", "revision": "v2"},
            "dataset.revision: 'v2' is not the revision",
        ),
    ],
)
def test_the_spec_refuses_a_dataset_that_is_neither_or_both(dataset: dict[str, Any], said: str) -> None:
    spec = {
        "name": "e",
        "dataset": dataset,
        "target": {"kind": "python", "function": "m:f"},
        "scorers": [{"kind": "exact_match"}],
    }
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    assert said in str(caught.value)


def test_an_hf_path_is_the_repository_its_revision_and_its_file() -> None:
    spec = parse_spec(
        {
            "name": "e",
            "dataset": {"path": "hf://datasets/o/n@refs%2Fconvert%2Fparquet/default/test/0000.parquet"},
            "target": {"kind": "python", "function": "m:f"},
            "scorers": [{"kind": "exact_match"}],
        }
    )
    assert (spec.dataset.hf, spec.dataset.revision, spec.dataset.path) == (
        "o/n",
        "refs/convert/parquet",
        "default/test/0000.parquet",
    )


GSM8K_README = """---
configs:
- config_name: main
  data_files:
  - split: train
    path: main/train-*
  - split: test
    path: main/test-*
- config_name: socratic
  data_files:
  - split: train
    path: socratic/train-*
  - split: test
    path: socratic/test-*
---
"""


@pytest.mark.slow
def test_the_docs_example_runs_and_names_its_commit(tmp_path: Path, hub: LocalHub, mock: Any) -> None:
    """docs/datasets.md's spec, its target pointed at the mock server, over a local `openai/gsm8k`
    laid out as the Hub's is; the doc's one-liner prints the commit it read."""
    text = (Path(__file__).parents[2] / "docs" / "datasets.md").read_text()
    spec = yaml.safe_load(text.split("```yaml\n")[1].split("```")[0])
    spec["target"] |= {"base_url": mock.base_url, "model": "mock-1", "api_key_env": None}
    rows = [{"question": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(3)]
    sha = hub.commit(
        "openai/gsm8k",
        {
            "README.md": GSM8K_README,
            "main/test-00000-of-00001.parquet": _parquet(rows),
            "main/train-00000-of-00001.parquet": _parquet(rows[:1]),
            "socratic/test-00000-of-00001.parquet": _parquet(rows[:2]),
        },
    )
    path = write_spec(tmp_path, **spec)
    store, env = tmp_path / "store", _env(hub, tmp_path / "hf")
    code, said, record = _run(path, store, env)
    assert code == 0 and record is not None, said
    command = text.split("```bash\npython -c '")[1].split("'")[0]
    shown = subprocess.run(
        [sys.executable, "-c", command, str(store), record["run_id"]],
        capture_output=True,
        text=True,
        check=True,
    )
    assert shown.stdout.strip() == sha
    assert record["n_items"] == 3
