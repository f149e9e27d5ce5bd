"""Orchestration glue: driving a run or a rescore end to end, with or without Prefect.

    drive.py        the skeleton both follow (`drive`), and the `Host` that runs it (`EMBEDDED`:
                    the terminal; a Prefect flow run: `flows/_host.py`)
    run.py          `drive_run`: plan, gold check, execute every cell against its target, close
    rescore.py      `drive_rescore`: new scorers over a stored run's outputs
    target.py       a run's target opened (and closed) in this process
    dask.py         a run's shards on a Dask cluster (`--dask`): the driver's side, `dask_host`
    remote.py       a Dask worker's side: `execute_shard`, which imports no Dask
    finish.py       how an execution ends in its record (`finish_run`)
    prefect_env.py  whether the terminal runs under Prefect;  ui.py  `assay ui`, the local server

The public names are loaded on first use: `assay.cli` imports `prefect_env` for every command,
and the drivers bring in the whole run machinery.
"""

from assay._lazy import lazy_exports

# `drive` (the skeleton) shares its module's name, so it is reached through `assay.orchestrate.drive`.
__all__, __getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "drive": ("EMBEDDED", "Host"),
        "run": ("drive_run",),
        "rescore": ("drive_rescore",),
        "finish": ("finish_run",),
    },
)
