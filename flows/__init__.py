"""Assay's Prefect flows (the design card's), with what serves them and decides when they run.

    run.py          `assay-run`: `drive_run` in a flow run, its shards as tasks
    rescore.py      `assay-rescore`: `drive_rescore` in a flow run
    compare.py      `assay-compare`: a comparison, its artifact, a failed gate failing the flow run
    nightly.py      `assay-nightly`: `drive_nightly`, each run and comparison a subflow run
    prefect_env.py  whether the terminal runs under Prefect (imports Prefect only when asked)
    ui.py           `assay ui`: a local server, the deployments of prefect.yaml, a worker
    deployments.py  which of prefect.yaml's deployments `assay ui` deploys (new or changed there)

Each flow takes one parameter, its driver's request model (`assay.orchestrate`): Prefect renders
its fields as the deployment's form. Importing this package imports no Prefect: the CLI reaches
`prefect_env` and `ui` for every command, and the flows' modules only when it runs one.
"""
