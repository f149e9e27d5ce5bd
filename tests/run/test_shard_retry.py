"""A shard that fails part-way and is run again (what a Prefect task retry does) commits each
item exactly once: what the failed execution committed is not executed twice."""

from __future__ import annotations

import asyncio

from assay.run.execute import ShardExecutor
from assay.run.plan import open_runs
from assay.store import Store
from assay.targets import open_target
from tests.conftest import write_jsonl, write_spec

TARGET = '''
import asyncio

class Crash(BaseException):
    """An infrastructure failure: not an Exception, so no target wraps it as an item failure."""

calls = []
crashed = False

async def solve(x):
    global crashed
    calls.append(x)
    await asyncio.sleep(0.001 * int(x))
    if x == "20" and not crashed:
        crashed = True
        raise Crash("disk on fire")
    return x
'''


def test_a_retried_shard_runs_only_what_the_failed_execution_did_not_commit(tmp_path):
    (tmp_path / "retry_target.py").write_text(TARGET)
    write_jsonl(tmp_path / "d.jsonl", [{"input": str(i), "expected": str(i)} for i in range(25)])
    spec = write_spec(
        tmp_path,
        name="retry",
        dataset={"path": "d.jsonl"},
        target={"kind": "python", "function": "retry_target:solve"},
        scorers=[{"kind": "exact_match"}],
        concurrency=1,
    )
    (plan,) = open_runs(spec, store=Store(tmp_path / "s"))
    (shard,) = plan.shards()

    async def execution() -> None:
        target = open_target(plan.spec.target, concurrency=1, seed=0, spec_dir=str(tmp_path))
        try:
            await ShardExecutor.for_target(plan, target).run_shard(shard)
        finally:
            await target.aclose()

    try:
        asyncio.run(execution())
    except BaseException as crash:  # noqa: BLE001 - the target module's own Crash
        assert type(crash).__name__ == "Crash"
    else:
        raise AssertionError("the first execution should have crashed")
    import retry_target  # importable now: the target put the spec's folder on sys.path

    committed = len(Store(tmp_path / "s").done_keys(plan.run_id))
    assert committed == 20, "the items finished before the crash are committed"
    first_calls = len(retry_target.calls)

    asyncio.run(execution())
    items = Store(tmp_path / "s").run_items(plan.run_id)
    assert items.height == 25 and items["item_id"].n_unique() == 25
    assert Store(tmp_path / "s").run_scores(plan.run_id).height == 25
    assert len(retry_target.calls) - first_calls == 5, "the retry ran only the 5 unfinished items"
