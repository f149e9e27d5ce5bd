"""The Prefect flow run as the plain drivers' host (`assay.orchestrate.drive.Host`)."""

from __future__ import annotations

from assay.orchestrate.drive import Host
from assay.run.plan import MAX_SHARDS, new_run_id
from tasks import current_flow_run, run_shard
from tasks.publish import name_flow_run, publish_run_summary


def prefect_host() -> Host:
    """The current flow run as the driver's host: the run id derives from it (a retry of the flow
    run resumes the same run), a run is cut into up to `MAX_SHARDS` shards, each a cached, retried
    task visible in the UI, and the summary becomes an artifact. Outside a flow run (a flow's `.fn`
    called directly) the embedded host: one shard, a plain coroutine — fewer, larger Parquet parts
    make that path ~20 % faster (docs/performance.md)."""
    flow_run = current_flow_run()
    if flow_run is None:
        return Host()
    return Host(
        flow_run_id=str(flow_run.id),
        default_run_id=new_run_id(flow_run.created, suffix=flow_run.id.hex[:6]),
        shards=MAX_SHARDS,
        run_shard=run_shard,
        name=name_flow_run,
        publish=publish_run_summary,
    )
