"""`labels`: one row per human judgement of one item x trial on one scorer, and per revision.

A label is a person's value for what a scorer (or one criterion of it) measures, on that scorer's
scale, tied to the output it judged by `output_hash`: a rescore keeps the output and so the label;
a changed output makes it stale (`assay.store.labels`).
"""

from datetime import datetime
from typing import Annotated, TypedDict

import pyarrow as pa

from assay._schema._columns import TIMESTAMP, Column, schema_of


class LabelRow(TypedDict, total=False):
    """A row of `labels`, as `assay.store.labels.write_labels` takes it (`revision` is the
    store's: it adds it) and `read_labels` returns it, with the run's id (the partition key)."""

    run_id: str
    revision: Annotated[
        int,
        Column(
            pa.int64(),
            "which import of the run's labels the row belongs to, from 1 (each import is a file of"
            " its own, never changed); a labeller's current label of an item x trial x scorer is"
            " the one of the highest revision",
        ),
    ]
    item_id: Annotated[str, Column(pa.string(), "the labelled item's id (`items.item_id`)")]
    trial: Annotated[int, Column(pa.int32(), "the labelled item's trial")]
    scorer: Annotated[
        str, Column(pa.string(), "the scorer (or the scorer's criterion) the label judges, by name")
    ]
    value: Annotated[
        float,
        Column(
            pa.float64(),
            "the person's value on the scorer's scale (`scores.score`: 0 or 1 for a pass/fail scorer,"
            " in [0, 1] otherwise)",
        ),
    ]
    labeller: Annotated[str, Column(pa.string(), "who labelled it (a name or an id)")]
    labelled_at: Annotated[
        datetime, Column(TIMESTAMP, "when it was labelled (UTC); the import's time if the file gave none")
    ]
    note: Annotated[str | None, Column(pa.string(), "the labeller's note, if any")]
    output_hash: Annotated[
        str,
        Column(
            pa.string(),
            "sha256 of the output judged (`items.output` as stored); the label is stale where the"
            " item's current output hashes otherwise",
        ),
    ]
    inclusion_probability: Annotated[
        float | None,
        Column(
            pa.float64(),
            "the chance the item had of being picked for labelling (`assay labels sample`); null"
            " for labels of a uniform random sample, which is what corrected estimates then assume",
        ),
    ]


LABELS = schema_of(LabelRow, besides=("run_id",))
