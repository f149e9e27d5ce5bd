"""Orchestration glue: driving a run, a rescore, a comparison or a nightly end to end — plain
code that never imports Prefect (`assay.tasks` and `assay.flows` host it in Prefect flow runs).

    drive.py        the skeleton run and rescore follow (`drive`), and the `Host` that runs it
                    (`EMBEDDED`: the terminal; a Prefect flow run: `tasks/host.py`)
    run.py          `drive_run` (its parameters: `RunRequest`): plan, gold check, execute every
                    cell against its target, close
    rescore.py      `drive_rescore` (`RescoreRequest`): new scorers over a stored run's outputs
    compare.py      `compare_and_store` (`CompareRequest`): a comparison made and stored
    nightly.py      `drive_nightly` (`NightlyRequest`): each spec run, compared, old nights pruned
    target.py       a run's target opened (and closed) in this process
    dask.py         a run's shards on a Dask cluster (`--dask`): the driver's side, `dask_host`
    worker.py       a Dask worker's side: `execute_shard`, which imports no Dask
    finish.py       how an execution ends in its record (`finish_run`)
    loop.py         the event loop where Assay owns it (uvloop)

Each request is one pydantic model: the driver takes it, and so does the Prefect flow that hosts
the driver (the deployment's form in the UI shows its fields). The public names are loaded on
first use: the drivers bring in the whole run machinery.
"""

from assay._lazy import lazy_exports

# `drive` (the skeleton) shares its module's name, so it is reached through `assay.orchestrate.drive`.
__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "drive": ("EMBEDDED", "Host"),
        "run": ("RunRequest", "drive_run"),
        "rescore": ("RescoreRequest", "drive_rescore"),
        "compare": ("CompareRequest", "compare_and_store"),
        "nightly": ("NightlyRequest", "drive_nightly"),
        "finish": ("finish_run",),
    },
)
