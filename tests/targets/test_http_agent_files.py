"""What an `http_agent` attempt sends and keeps, against the reference harness over real HTTP:
fixture files uploaded as multipart, artifacts and the trajectory kept in the store, harness run
ids remembered by the run (a reused one is caught, even across a resume)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from assay.cli import main
from assay.errors import DatasetError, TargetFailure
from assay.spec import HttpAgentTarget
from assay.spec.dataset import Item
from assay.store import Store
from assay.targets import HttpAgent, TargetResult
from assay.testing._background import BackgroundServer
from assay.testing.harness import DEFAULT_CAPABILITIES, HarnessServer
from tests.conftest import (
    only_run_id,
    run_assay,
    start_run,
    wait_for,
    write_jsonl,
    write_spec,
)
from tests.evaluators.test_remote_scorer import Evaluator

RUN = "run-assay-1"
# Every byte value, CRLFs and a line that looks like a multipart boundary: bytes a careless
# multipart encoder or decoder would mangle.
AWKWARD = bytes(range(256)) + b"\r\n--boundary\r\n\r\n" + bytes(range(255, -1, -1))


def caps(**accepts: Any) -> dict[str, Any]:
    return {**DEFAULT_CAPABILITIES, "accepts": {**DEFAULT_CAPABILITIES["accepts"], **accepts}}


def item(item_id: str, value: Any = "hello", **fields: Any) -> Item:
    return Item(item_id=item_id, item_index=0, input=value, expected=None, fields={"input": value, **fields})


def calls(
    harness: HarnessServer,
    attempts: list[tuple[Item, int]],
    *,
    store: Store | None,
    spec_dir: Path | None = None,
    **spec: Any,
) -> list[TargetResult | TargetFailure]:
    """Each (item, trial) through one agent, in turn; failures returned rather than raised."""

    async def go() -> list[TargetResult | TargetFailure]:
        target = HttpAgentTarget(kind="http_agent", base_url=harness.base_url, poll_interval=0.01, **spec)
        agent = HttpAgent(target, concurrency=4, run_id=RUN, store=store, spec_dir=spec_dir)
        results: list[TargetResult | TargetFailure] = []
        try:
            for one, trial in attempts:
                try:
                    results.append(await agent(one, trial))
                except TargetFailure as failure:
                    results.append(failure)
        finally:
            await agent.aclose()
        return results

    return asyncio.run(go())


def one(harness: HarnessServer, store: Store | None, one_item: Item | None = None, **options: Any) -> Any:
    (result,) = calls(harness, [(one_item or item("q1"), 0)], store=store, **options)
    return result


def prepare_problems(harness: HarnessServer, items: list[Item], spec_dir: Path) -> list[str]:
    """The dataset problems `HttpAgent.prepare` refuses `items` with (it must refuse them)."""

    async def prepare() -> None:
        agent = HttpAgent(
            HttpAgentTarget(kind="http_agent", base_url=harness.base_url), concurrency=1, spec_dir=spec_dir
        )
        try:
            await agent.prepare(items)
        finally:
            await agent.aclose()

    with pytest.raises(DatasetError) as bad:
        asyncio.run(prepare())
    return bad.value.problems


def files_under(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


# -- fixture files -----------------------------------------------------------------------------


def test_local_fixture_files_are_uploaded_as_multipart_and_arrive_intact(tmp_path, harness):
    (tmp_path / "fx").mkdir()
    (tmp_path / "fx" / "a.bin").write_bytes(AWKWARD)
    (tmp_path / "notes.txt").write_text("naïve café\n")
    files = [
        {"path": "data/a.bin", "file": "fx/a.bin"},  # relative to the spec's folder
        {"path": "b.txt", "file": str(tmp_path / "notes.txt")},  # absolute, inside the spec's folder
        {"path": "c.csv", "url": "https://files.example/c.csv"},
    ]
    result = one(harness, None, item("q1", files=files), spec_dir=tmp_path)
    assert isinstance(result, TargetResult), result
    sent = {"data/a.bin": hashlib.sha256(AWKWARD).hexdigest()}
    sent["b.txt"] = hashlib.sha256((tmp_path / "notes.txt").read_bytes()).hexdigest()
    # The harness hashed what it received: the bytes arrived intact, under their paths.
    assert result.caller_metadata["structured_output"] == {"files": sent}
    stats = harness.stats()
    assert stats["uploads"] == [sent]
    (body,) = stats["bodies"]
    assert body["files"] == [{"path": "c.csv", "url": "https://files.example/c.csv"}], "URLs stay URLs"
    assert body["uploads"] == [
        {"path": "data/a.bin", "size": len(AWKWARD), "sha256": sent["data/a.bin"]},
        {"path": "b.txt", "size": len("naïve café\n".encode()), "sha256": sent["b.txt"]},
    ]
    assert body["metadata"] == {"run_id": RUN, "item_id": "q1", "trial": 0}
    create = next(h for h in stats["headers"] if h["route"] == "create")
    assert create["content_type"] == "multipart/form-data"


def test_a_retried_multipart_start_sends_the_same_bytes_with_the_same_key(tmp_path, harness):
    (tmp_path / "a.bin").write_bytes(AWKWARD)
    harness.configure(faults=[{"route": "create", "status": 503, "retry_after": 0}])
    result = one(harness, None, item("q1", files=[{"path": "a.bin", "file": "a.bin"}]), spec_dir=tmp_path)
    assert isinstance(result, TargetResult), result
    assert (
        result.caller_metadata["structured_output"]["files"]["a.bin"] == hashlib.sha256(AWKWARD).hexdigest()
    )
    keys = [h["idempotency_key"] for h in harness.stats()["headers"] if h["route"] == "create"]
    assert len(keys) == 2 and keys[0] == keys[1]


def test_a_harness_taking_uploads_only_gets_local_files_and_drops_items_with_urls(tmp_path, harness):
    harness.configure(capabilities=caps(file_input=True, file_urls=False))
    (tmp_path / "a.txt").write_text("A")
    local = item("local", files=[{"path": "a.txt", "file": "a.txt"}])
    remote = item("remote", files=[{"path": "a.txt", "url": "https://files.example/a.txt"}])

    async def prepare() -> dict[str, Any]:
        target = HttpAgentTarget(kind="http_agent", base_url=harness.base_url)
        agent = HttpAgent(target, concurrency=1, spec_dir=tmp_path)
        try:
            return await agent.prepare([local, remote])
        finally:
            await agent.aclose()

    snapshot = asyncio.run(prepare())
    assert snapshot["dropped_items"] == [
        {
            "item_id": "remote",
            "reason": "the harness accepts fixture files only as uploads, and the item's files are URLs",
        }
    ]
    result = one(harness, None, local, spec_dir=tmp_path)
    assert isinstance(result, TargetResult) and result.caller_metadata["structured_output"]["files"]


def test_a_missing_local_fixture_file_is_a_dataset_error_or_a_failed_item(tmp_path, harness):
    missing = item("m", files=[{"path": "a.txt", "file": "nope/a.txt"}])
    assert prepare_problems(harness, [item("fine"), missing], tmp_path) == [
        f"item 'm': field 'files': fixture file 'nope/a.txt' not found (looked for {tmp_path / 'nope/a.txt'})"
    ]
    failure = one(harness, None, missing, spec_dir=tmp_path)
    assert isinstance(failure, TargetFailure) and failure.kind == "exception"
    assert "fixture file 'nope/a.txt' cannot be read" in failure.message
    assert "create" not in harness.stats()["requests"], "no run started without its files"


@pytest.mark.parametrize("name", ["/proc/self/environ", "../outside.txt", "sub/../../outside.txt"])
def test_a_local_file_outside_the_spec_folder_is_never_uploaded(tmp_path, harness, name):
    (tmp_path / "spec").mkdir()
    (tmp_path / "outside.txt").write_text("not yours")
    escaping = item("e", files=[{"path": "a.txt", "file": name}])

    assert prepare_problems(harness, [escaping], tmp_path / "spec") == [
        f"item 'e': field 'files': fixture file {name!r} is outside the spec's folder: not uploaded"
    ]
    failure = one(harness, None, escaping, spec_dir=tmp_path / "spec")
    assert isinstance(failure, TargetFailure) and "outside the spec's folder" in failure.message
    assert "create" not in harness.stats()["requests"]


def test_a_files_entry_needs_a_url_or_a_file_not_both(harness):
    both = item("both", files=[{"path": "a", "url": "https://x/a", "file": "a"}])
    failure = one(harness, None, both)
    assert isinstance(failure, TargetFailure) and "one of `url` or `file`" in failure.message


# -- artifacts and the trajectory in the store ---------------------------------------------------


ARTIFACTS = [
    {"path": "out/report.md", "size": 8},
    {"path": "./out/data.bin"},
    {"path": "out/report.md"},  # listed twice: fetched once
    {"path": "/etc/passwd", "size": 1},
    {"path": "../../escape.txt", "size": 1},
    {"path": "out/../../escape.txt"},
    {"path": "C:/Windows/x"},
    {"path": "gone.txt"},  # listed but 404
]
SERVED = {
    "out/report.md": "# report",
    "out/data.bin": AWKWARD,
    "../../escape.txt": "must never be fetched",
    "out/../../escape.txt": "must never be fetched",
    "/etc/passwd": "must never be fetched",
}


def test_artifacts_and_the_trajectory_are_kept_in_the_attempts_folder(tmp_path, harness):
    store = Store(tmp_path / "store")
    steps = [
        {"role": "user", "content": "hi", "id": "s1"},  # a field the protocol does not name: kept
        {"role": "assistant", "content": "4", "tool_calls": [{"name": "calc"}], "cost_usd": 0.5},
    ]
    harness.configure(behaviors={"*": {"artifacts": ARTIFACTS, "files": SERVED, "trajectory": steps}})
    result = one(harness, store, item("q/1"), spec_dir=tmp_path)
    assert isinstance(result, TargetResult), result
    # One folder per harness run, inside the item x trial's (a session runs several).
    hid = result.caller_metadata["harness_run_id"]
    folder = store.artifacts_dir(RUN, "q/1", 0) / hid
    assert folder == store.artifacts_root / f"run_id={RUN}" / "q%2F1" / "0" / hid
    assert files_under(folder) == {"files/out/report.md", "files/out/data.bin", "trajectory.json"}
    assert (folder / "files/out/report.md").read_text() == "# report"
    assert (folder / "files/out/data.bin").read_bytes() == AWKWARD
    # Paths relative to `<store>/artifacts`, every one a file that exists.
    assert result.artifacts == [
        f"run_id={RUN}/q%2F1/0/{hid}/files/out/data.bin",
        f"run_id={RUN}/q%2F1/0/{hid}/files/out/report.md",
        f"run_id={RUN}/q%2F1/0/{hid}/trajectory.json",
    ]
    assert all((store.artifacts_root / p).is_file() for p in result.artifacts)
    # Nothing was written anywhere else, and nothing unsafe was asked for.
    assert files_under(store.root) == {f"artifacts/{p}" for p in result.artifacts} | {
        f"artifacts/run_id={RUN}/@harness-runs.jsonl"
    }
    assert not (tmp_path / "escape.txt").exists()
    assert harness.stats()["requests"]["files"] == 3, "report, data and the 404; never an unsafe path"
    warnings = result.caller_metadata["warnings"]
    assert sum("unsafe path" in w for w in warnings) == 4
    assert any("'gone.txt' not downloaded" in w and "HTTP 404" in w for w in warnings)

    document = json.loads((folder / "trajectory.json").read_text())
    assert document["harness_run_id"] == result.caller_metadata["harness_run_id"]
    assert document["status"] == "valid" and document["steps"] == steps
    assert result.trajectory == steps


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_size_limits_skip_files_with_a_warning(tmp_path, harness, chunked):
    store = Store(tmp_path / "store")
    artifacts = [
        {"path": "small.txt"},  # 10 bytes
        {"path": "declared-big.txt", "size": 5000},  # skipped on its declared size: never fetched
        {"path": "undeclared-big.bin"},  # 3000 bytes: refused on the reply's length, or cut off
        {"path": "a.txt", "size": 600},
        {"path": "b.txt", "size": 600},  # would pass the attempt's 1000
        {"path": "c.txt"},  # 300 bytes, still fits after a.txt
    ]
    served = {
        "small.txt": "x" * 10,
        "declared-big.txt": "x" * 5000,
        "undeclared-big.bin": "y" * 3000,
        "a.txt": "a" * 600,
        "b.txt": "b" * 600,
        "c.txt": "c" * 300,
    }
    harness.configure(behaviors={"*": {"artifacts": artifacts, "files": served, "chunked_files": chunked}})
    result = one(harness, store, max_artifact_bytes=1000, max_attempt_bytes=1000)
    assert isinstance(result, TargetResult), result
    folder = store.artifacts_dir(RUN, "q1", 0) / result.caller_metadata["harness_run_id"]
    # No partial file is left of the one cut off.
    assert files_under(folder) == {"files/small.txt", "files/a.txt", "files/c.txt", "trajectory.json"}
    assert (folder / "files/c.txt").read_text() == "c" * 300
    warnings = result.caller_metadata["warnings"]
    # Cut off without a declared size, it was past what the attempt had left (990 bytes).
    big = "larger, past target.max_attempt_bytes" if chunked else "3000 bytes, past target.max_artifact_bytes"
    assert warnings == [
        "artifact 'declared-big.txt' not downloaded: 5000 bytes, past target.max_artifact_bytes (1000)",
        f"artifact 'undeclared-big.bin' not downloaded: {big} (1000)",
        "artifact 'b.txt' not downloaded: 600 bytes, past target.max_attempt_bytes (1000)",
    ]
    assert harness.stats()["requests"]["files"] == 4, "small, undeclared-big (refused), a and c"


def test_an_item_run_again_starts_from_an_empty_folder(tmp_path, harness):
    store = Store(tmp_path / "store")
    stale = store.artifacts_dir(RUN, "q1", 0) / "files" / "left-by-a-killed-execution.txt"
    stale.parent.mkdir(parents=True)
    stale.write_text("old")
    result = one(harness, store)
    assert isinstance(result, TargetResult) and not stale.exists()
    assert result.artifacts == [
        f"run_id={RUN}/q1/0/{result.caller_metadata['harness_run_id']}/trajectory.json"
    ]


def test_a_long_harness_run_id_gets_a_hashed_folder(tmp_path, harness):
    store = Store(tmp_path / "store")
    harness.configure(behaviors={"*": {"run_id": "r" * 200}})
    result = one(harness, store)
    (path,) = result.artifacts
    assert re.fullmatch(rf"run_id={RUN}/q1/0/run-[0-9a-f]{{16}}/trajectory\.json", path), path


def test_a_failed_run_keeps_its_trajectory_but_not_its_files(tmp_path, harness):
    store = Store(tmp_path / "store")
    stale = store.artifacts_dir(RUN, "q1", 0) / "trajectory.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{}")
    harness.configure(
        behaviors={"*": {"status": "failed", "artifacts": [{"path": "a"}], "files": {"a": "x"}}}
    )
    failure = one(harness, store)
    assert isinstance(failure, TargetFailure)
    folder = store.artifacts_dir(RUN, "q1", 0)
    (kept,) = failure.artifacts
    assert kept.endswith("/trajectory.json") and (store.artifacts_root / kept).is_file()
    assert files_under(folder) == {kept.split("/q1/0/", 1)[1]}  # the stale file gone, no `files/`
    assert json.loads((store.artifacts_root / kept).read_text())["steps"]


def test_without_a_workspace_or_a_store_no_file_is_kept(tmp_path, harness):
    harness.configure(
        capabilities={**DEFAULT_CAPABILITIES, "provides": {"trajectory": True, "workspace": False}},
        behaviors={"*": {"artifacts": [{"path": "a.txt"}], "files": {"a.txt": "A"}}},
    )
    store = Store(tmp_path / "store")
    result = one(harness, store)
    assert result.artifacts == [
        f"run_id={RUN}/q1/0/{result.caller_metadata['harness_run_id']}/trajectory.json"
    ]
    assert "does not serve files (provides.workspace is false)" in result.caller_metadata["warnings"][0]
    harness.reset()
    bare = one(harness, None)  # no store (a target used on its own): nothing written, steps returned
    assert bare.artifacts is None and len(bare.trajectory) == 2
    assert "files" not in harness.stats()["requests"]


@pytest.mark.parametrize(("kind", "kept_steps"), [("partial", 2), ("invalid", None), ("missing", None)])
def test_only_a_valid_or_partial_trajectory_is_kept(tmp_path, harness, kind, kept_steps):
    store = Store(tmp_path / "store")
    harness.configure(behaviors={"*": {"trajectory": kind}})
    result = one(harness, store)
    path = store.artifacts_dir(RUN, "q1", 0) / result.caller_metadata["harness_run_id"] / "trajectory.json"
    if kept_steps is None:
        assert result.trajectory is None and result.artifacts is None and not path.exists()
    else:
        document = json.loads(path.read_text())
        assert document["status"] == "partial" and document["dropped_steps"] == 2
        assert len(result.trajectory) == kept_steps == len(document["steps"])


# -- reused harness run ids -------------------------------------------------------------------


def test_a_run_id_reused_after_the_target_was_reopened_fails_the_item(tmp_path, harness):
    store = Store(tmp_path / "store")
    harness.configure(behaviors={"*": {"run_id": "same"}})
    (first,) = calls(harness, [(item("q1"), 0)], store=store)
    assert isinstance(first, TargetResult)
    # A new process (a resume) opens the target again: the run's ledger remembers the id.
    (second,) = calls(harness, [(item("q2"), 0)], store=store)
    assert store.artifacts_dir(RUN, "q1", 0).is_dir(), "the first item's files are left alone"
    assert not store.artifacts_dir(RUN, "q2", 0).exists()
    # Even the same attempt run again must get a new id: the old run's results are not its own.
    (again,) = calls(harness, [(item("q1"), 0)], store=store)
    for failure in (second, again):
        assert isinstance(failure, TargetFailure) and failure.kind == "protocol"
        assert failure.message == "harness reused run id same (already returned for item 'q1' trial 0)"
    assert harness.stats()["requests"]["status"] == 1, "a reused run is never polled"


def test_a_torn_ledger_line_is_ignored(tmp_path, harness):
    store = Store(tmp_path / "store")
    ledger = store.run_sidecar(RUN, "harness-runs.jsonl")
    ledger.parent.mkdir(parents=True)
    ledger.write_text('{"id": "old", "item_id": "q0", "trial": 0}\n{"id": "tor')
    harness.configure(behaviors={"q1": {"run_id": "old"}})
    first, second = calls(harness, [(item("q1"), 0), (item("q2"), 0)], store=store)
    assert isinstance(first, TargetFailure) and "already returned for item 'q0' trial 0" in first.message
    assert isinstance(second, TargetResult)


# -- through `assay run` ---------------------------------------------------------------------


@pytest.fixture
def evaluator() -> Iterator[BackgroundServer[Evaluator]]:
    with BackgroundServer(Evaluator(), name="evaluator") as server:
        yield server


def test_assay_run_keeps_files_uploads_fixtures_and_the_remote_scorer_sees_the_trajectory(
    tmp_path, harness, evaluator, capsys
):
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures" / "q1.bin").write_bytes(AWKWARD)
    evaluator.app.reply = lambda body: [
        {"name": "steps", "score": min(1.0, len(body["trajectory"] or []) / 2)}
    ]
    harness.configure(
        behaviors={"*": {"artifacts": [{"path": "out.txt"}], "files": {"out.txt": "made"}, "steps": 2}}
    )
    write_jsonl(
        tmp_path / "d.jsonl",
        [
            {"id": "q0", "input": "plain"},
            {"id": "q1", "input": "with a file", "files": [{"path": "in/q1.bin", "file": "fixtures/q1.bin"}]},
        ],
    )
    spec = write_spec(
        tmp_path,
        name="agent-files",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "http_agent", "base_url": harness.base_url, "poll_interval": 0.01},
        scorers=[{"kind": "remote", "name": "judge", "url": f"http://127.0.0.1:{evaluator.port}/evaluate"}],
        trials=2,
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "store"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    store = Store(tmp_path / "store")
    items = store.run_items(summary["run_id"]).sort("item_id", "trial")
    assert items["outcome"].to_list() == ["completed"] * 4
    root = store.artifacts_root
    for row in items.iter_rows(named=True):
        hid = json.loads(row["caller_metadata"])["harness_run_id"]
        prefix = f"run_id={summary['run_id']}/{row['item_id']}/{row['trial']}/{hid}"
        assert row["artifacts"] == [f"{prefix}/files/out.txt", f"{prefix}/trajectory.json"]
        assert all((root / p).is_file() for p in row["artifacts"])
        assert (root / prefix / "files/out.txt").read_text() == "made"
    # The fixture reached the harness intact, for both trials.
    assert harness.stats()["uploads"] == [{"in/q1.bin": hashlib.sha256(AWKWARD).hexdigest()}] * 2
    # The remote scorer was sent each attempt's trajectory.
    assert len(evaluator.app.bodies) == 4
    assert all(
        [s["role"] for s in b["trajectory"]] == ["assistant", "assistant"] for b in evaluator.app.bodies
    )
    scores = store.run_scores(summary["run_id"])
    assert scores["scorer"].unique().to_list() == ["judge.steps"] and scores["score"].to_list() == [1.0] * 4

    # A rescore never calls the agent: its scorers get the trajectory the run kept.
    evaluator.app.bodies.clear()
    scorer = f"{{kind: remote, name: again, url: 'http://127.0.0.1:{evaluator.port}/evaluate'}}"
    args = ["rescore", summary["run_id"], "--scorer", scorer, "--store", str(tmp_path / "store"), "--json"]
    assert main(args) == 0
    capsys.readouterr()
    assert len(evaluator.app.bodies) == 4 and all(len(b["trajectory"]) == 2 for b in evaluator.app.bodies)


@pytest.mark.slow
def test_a_run_id_reused_after_a_sigkill_and_resume_fails_the_item(tmp_path, harness):
    # q0 ends at once, q1 after 2.2 s (each committed 2 s after it ended), q2 and q3 never.
    harness.configure(
        behaviors={"q1": {"delay": 2.2}, "q2": {"never_finish": True}, "q3": {"never_finish": True}},
        capabilities={
            **DEFAULT_CAPABILITIES,
            "accepts": {**DEFAULT_CAPABILITIES["accepts"], "cancel": False},
        },
    )
    write_jsonl(tmp_path / "d.jsonl", [{"id": f"q{i}", "input": f"task {i}"} for i in range(4)])
    spec = write_spec(
        tmp_path,
        name="agent-resume",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "http_agent", "base_url": harness.base_url, "poll_interval": 0.01},
        scorers=[{"kind": "includes", "name": "echo", "value": "task"}],
        concurrency=4,
        fail_on_item_error_rate=1,
    )
    store_path = tmp_path / "store"
    process = start_run(spec, store_path)
    wait_for(
        lambda: len(list(store_path.glob("items/run_id=*/part-*.parquet"))) == 2,
        "q0 and q1 committed",
        process,
    )
    process.send_signal(signal.SIGKILL)
    process.wait()
    run_id = only_run_id(store_path)
    store = Store(store_path)
    assert store.done_keys(run_id) == {("q0", 0), ("q1", 0)}
    ids = {item_id: run for run, item_id in harness.stats()["runs"].items()}

    # The harness now hands back q0's id (a committed item) for q2, and q3's own earlier id (an
    # attempt the kill cut short) for q3 again.
    harness.configure(behaviors={"q2": {"run_id": ids["q0"]}, "q3": {"run_id": ids["q3"]}})
    started = time.monotonic()
    result = run_assay("resume", run_id, "--store", str(store_path), "--json")
    assert result.returncode == 0, result.stderr
    assert time.monotonic() - started < 60
    items = store.run_items(run_id).sort("item_id")
    failed = items.filter(pl.col("outcome") == "failed")
    assert dict(failed.select("item_id", "error").iter_rows()) == {
        "q2": f"harness reused run id {ids['q0']} (already returned for item 'q0' trial 0)",
        "q3": f"harness reused run id {ids['q3']} (already returned for item 'q3' trial 0)",
    }
    assert items.filter(pl.col("outcome") == "completed")["item_id"].to_list() == ["q0", "q1"]
    assert not store.artifacts_dir(run_id, "q3", 0).exists()


def test_a_session_keeps_every_harness_runs_files(tmp_path, harness, capsys):
    (tmp_path / "two_prompts.py").write_text(
        "async def policy(session):\n"
        "    await session.start(session.prompt)\n"
        "    return await session.resume('and again')\n"
    )
    harness.configure(behaviors={"*": {"artifacts": [{"path": "out.txt"}], "files": {"out.txt": "made"}}})
    write_jsonl(tmp_path / "d.jsonl", [{"id": "q0", "input": "first"}])
    spec = write_spec(
        tmp_path,
        name="agent-session",
        dataset={"path": "d.jsonl", "id": "id"},
        target={"kind": "http_agent", "base_url": harness.base_url, "poll_interval": 0.01},
        scorers=[{"kind": "includes", "name": "again", "value": "again"}],
        policy="two_prompts:policy",
    )
    assert main(["run", str(spec), "--store", str(tmp_path / "store"), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    store = Store(tmp_path / "store")
    (row,) = store.run_items(summary["run_id"]).to_dicts()
    first, second = sorted(harness.stats()["runs"], key=lambda r: int(r.split("-")[1]))
    prefix = f"run_id={summary['run_id']}/q0/0"
    assert row["artifacts"] == [
        f"{prefix}/{first}/files/out.txt",
        f"{prefix}/{first}/trajectory.json",
        f"{prefix}/{second}/files/out.txt",
        f"{prefix}/{second}/trajectory.json",
    ]
    assert all((store.artifacts_root / p).is_file() for p in row["artifacts"])


def test_local_fixture_files_content_is_part_of_the_run_identity(tmp_path):
    from assay.run.identity import identity_of
    from assay.spec import EvalSpec

    (tmp_path / "a.bin").write_bytes(b"one")
    spec = EvalSpec.model_validate(
        {
            "name": "x",
            "dataset": {"path": "d.jsonl"},
            "target": {"kind": "http_agent", "base_url": "http://127.0.0.1:9"},
            "scorers": [{"kind": "exact_match"}],
        }
    )
    with_file = [item("q1", files=[{"path": "a.bin", "file": "a.bin"}])]
    first = identity_of(spec, with_file, tmp_path)
    (tmp_path / "a.bin").write_bytes(b"two")
    second = identity_of(spec, with_file, tmp_path)
    assert first.fixtures and second.fixtures and first.fixtures != second.fixtures
    assert second.differences(first) == ["the fixture files' content"]
    # No local file, no fixtures part: such runs keep the digest they had before it existed.
    plain = identity_of(spec, [item("q1")], tmp_path)
    assert plain.fixtures is None and plain.digest == identity_of(spec, [item("q1")]).digest
