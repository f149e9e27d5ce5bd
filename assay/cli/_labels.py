"""The commands over people's labels: `assay labels import | export | sample` and `assay agreement`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from assay.cli._output import emit
from assay.cli._parser import EXIT_OK


def labels(args: argparse.Namespace) -> int:
    """`assay labels import FILE`, `export RUN` (JSONL on stdout), `sample RUN --scorer S --n N`."""
    from assay.analysis import labelling
    from assay.cli._runs import resolve_run
    from assay.store import Store
    from assay.store.labels import write_labels

    store = Store(args.store)
    if args.labels_command == "import":
        run_id = resolve_run(store, args.run) if args.run else None
        grouped = labelling.parse_labels(
            store, Path(args.file), run_id=run_id, scorer=args.scorer, labeller=args.labeller
        )
        written = {
            rid: {"revision": write_labels(store, rid, rows), "labels": len(rows)}
            for rid, rows in grouped.items()
        }
        if args.json:
            print(json.dumps({"runs": written}))
        elif not args.quiet:
            for rid, done in written.items():
                print(f"{rid}: {done['labels']} labels imported (revision {done['revision']})")
        return EXIT_OK
    run_id = resolve_run(store, args.run_id)
    if args.labels_command == "export":
        for row in labelling.export_rows(store, run_id):
            sys.stdout.write(json.dumps(row, ensure_ascii=False) + "\n")
        return EXIT_OK
    tasks = labelling.sample_tasks(
        store, run_id, args.scorer, n=args.n, strategy=args.strategy, seed=args.seed
    )
    out = Path(args.out) if args.out else None
    text = labelling.write_tasks(tasks, out)
    if out is None:
        sys.stdout.write(text)
    elif args.json:
        print(json.dumps({"path": str(out), "tasks": len(tasks)}))
    elif not args.quiet:
        print(f"{len(tasks)} tasks written to {out}")
    return EXIT_OK


def agreement(args: argparse.Namespace) -> int:
    """`assay agreement RUN --scorer S`: the judge against people's labels, and its corrected mean."""
    from assay.analysis.judge_trust import agreement_report, nan_to_none
    from assay.cli._runs import resolve_run
    from assay.store import Store

    store = Store(args.store)
    report = agreement_report(
        store, resolve_run(store, args.run_id), args.scorer, scale=args.scale, by=args.by
    )
    emit(args, nan_to_none(report), "print_agreement")
    return EXIT_OK
