"""The command line's surface: its commands and their arguments (argparse), and its exit statuses."""

from __future__ import annotations

import argparse
import sys

from assay.outcomes import Adjustment, Verdict

DESCRIPTION = "The `assay` command: run, resume, show and list evals from a terminal."
EXIT_OK, EXIT_GATE, EXIT_INPUT, EXIT_LOST, EXIT_OUTPUT, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
_RUN_HELP = "a run id, a unique prefix of one, or `latest`"
_ADJUST_HELP = "adjust verdicts for the comparisons made at once: holm (family-wise) or bh (false discovery)"


class _ArgumentParser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # argparse exits 2 too; keep its message short
        self.print_usage(sys.stderr)
        self.exit(EXIT_INPUT, f"error: {message}\n")


class _MainParser(_ArgumentParser):
    """`assay`'s own parser: its help ends with the `ASSAY_*` settings, from their model (imported
    only when the help is shown)."""

    def format_help(self) -> str:
        from assay.settings import help_text

        self.epilog = help_text()
        return super().format_help()


def build_parser() -> argparse.ArgumentParser:
    """The command line: every command, its arguments and its help."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--store", help="a folder or s3://bucket/prefix (default: $ASSAY_STORE or ./assay-store)"
    )
    common.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    common.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no table")
    common.add_argument("-v", "--verbose", action="store_true", help="show Prefect's logs")
    parser = _MainParser(
        prog="assay", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_ArgumentParser)

    run = commands.add_parser("run", parents=[common], help="run an eval spec")
    run.add_argument("spec", help="the eval spec (YAML)")
    run.add_argument(
        "--compare-to",
        metavar="RUN_ID",
        help="compare with this baseline run as items finish; stop at the verdict",
    )
    run.add_argument(
        "--prefect", action="store_true", help="run as a Prefect flow run even without PREFECT_API_URL"
    )
    run.add_argument(
        "--check-keys",
        action="store_true",
        help="try each agent's provider key with one cheap request before any container starts",
    )
    run.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="execute the shards on this Dask cluster's workers (tcp://HOST:PORT; default $ASSAY_DASK)",
    )
    estimate = commands.add_parser(
        "estimate", parents=[common], help="calls, tokens and cost a spec will take"
    )
    estimate.add_argument("spec")
    resume = commands.add_parser("resume", parents=[common], help="finish an interrupted run")
    resume.add_argument("run_id", help=_RUN_HELP)
    resume.add_argument(
        "--retry-failed",
        nargs="?",
        const="",
        metavar="KINDS",
        help="also run failed items again (only these failure kinds, comma-separated: http, timeout, "
        "connection, protocol, exception, rate_limit); each failed row is kept as history",
    )
    resume.add_argument(
        "--prefect", action="store_true", help="run as a Prefect flow run even without PREFECT_API_URL"
    )
    resume.add_argument(
        "--check-keys",
        action="store_true",
        help="try each agent's provider key with one cheap request before any container starts",
    )
    resume.add_argument(
        "--dask",
        metavar="ADDRESS",
        help="execute the shards on this Dask cluster's workers (tcp://HOST:PORT; default $ASSAY_DASK)",
    )
    rescore = commands.add_parser(
        "rescore", parents=[common], help="score a stored run again with new scorers"
    )
    rescore.add_argument("source_run_id", help=_RUN_HELP)
    rescore.add_argument("--spec", help="a YAML file whose `scorers` list is used (an eval spec will do)")
    rescore.add_argument(
        "--scorer", action="append", default=[], help="an inline scorer, YAML or a bare kind (repeatable)"
    )
    rescore.add_argument(
        "--budget", help="the rescore's own USD budget for its judging (default: the source's)"
    )
    rescore.add_argument("--concurrency", type=int, help="items scored at once (default: the source's)")
    rescore.add_argument(
        "--capture-requests",
        action=argparse.BooleanOptionalAction,
        help="capture the judges' requests and carry the source's forward (default: as the source did)",
    )
    rescore.add_argument(
        "--keep-scores",
        action="store_true",
        help="carry the source's scores forward (those no new scorer replaces), to compare with the source",
    )
    rescore.add_argument(
        "--prefect", action="store_true", help="run as a Prefect flow run even without PREFECT_API_URL"
    )
    compare = commands.add_parser(
        "compare", parents=[common], help="compare candidate runs with baseline runs"
    )
    compare.add_argument(
        "baseline", nargs="+", help="baseline run(s); several are averaged per item. " + _RUN_HELP
    )
    compare.add_argument(
        "--candidate", nargs="+", required=True, help="candidate run(s), named as the baseline"
    )
    compare.add_argument("--name", help="only runs of this spec name: `latest` is its newest run")
    compare.add_argument(
        "--threshold", action="append", default=[], metavar="NAME=VALUE", help="a scorer's verdict threshold"
    )
    compare.add_argument(
        "--max-item-error-rate", type=float, default=0.05, help="per run; 1 disables (default 0.05)"
    )
    compare.add_argument(
        "--max-scorer-error-rate", type=float, default=0.05, help="per side and scorer (default 0.05)"
    )
    compare.add_argument(
        "--fail-on",
        action="append",
        choices=[Verdict.REGRESSED.value, Verdict.INCONCLUSIVE.value],
        help="verdicts that fail (default regressed)",
    )
    compare.add_argument("--cluster", help="the annotation naming each item's cluster (default: `cluster`)")
    compare.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples (default 10000)")
    compare.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    compare.add_argument("--adjust", choices=list(Adjustment), default="none", help=_ADJUST_HELP)
    compare.add_argument(
        "--labels", action="store_true", help="gate labelled scorers on their judge-corrected delta"
    )
    compare.add_argument(
        "--prefect", action="store_true", help="run as a Prefect flow run even without PREFECT_API_URL"
    )
    power = commands.add_parser(
        "power", parents=[common], help="items a comparison needs to detect a difference"
    )
    power.add_argument("run_id", help=_RUN_HELP)
    power.add_argument("--mde", type=float, help="minimum detectable difference, e.g. 0.02")
    power.add_argument("--power", type=float, default=0.8, help="chance of detecting it (default 0.8)")
    power.add_argument("--labels", action="store_true", help="instead: the labels a corrected mean needs")
    power.add_argument("--scorer", help="with --labels: the model-graded scorer")
    power.add_argument("--width", type=float, help="with --labels: the interval's width, e.g. 0.1")
    nightly = commands.add_parser(
        "nightly", parents=[common], help="the nightly benchmark: run, compare, prune"
    )
    nightly.add_argument("specs", nargs="+", help="eval specs")
    nightly.add_argument("--retention", type=int, default=30, help="nightly runs kept per spec (default 30)")
    nightly.add_argument(
        "--prefect", action="store_true", help="run as a Prefect flow run even without PREFECT_API_URL"
    )
    leaderboard = commands.add_parser("leaderboard", parents=[common], help="rank the cells of a matrix run")
    leaderboard.add_argument("matrix_id")
    leaderboard.add_argument("--baseline", help="the cell the others are compared with (default: the first)")
    leaderboard.add_argument("--adjust", choices=list(Adjustment), default="none", help=_ADJUST_HELP)
    requests = commands.add_parser("requests", help="the captured model calls (the request sidecar)")
    requests_commands = requests.add_subparsers(
        dest="requests_command", required=True, parser_class=_ArgumentParser
    )
    export = requests_commands.add_parser(
        "export", parents=[common], help="a run's records as JSONL on stdout"
    )
    export.add_argument("run_id", help=_RUN_HELP)
    export.add_argument(
        "--format",
        choices=["assay", "v1"],
        default="assay",
        help="field names: Assay's (default) or @axlsdk/eval's request sidecar v1 (operationId, …)",
    )
    check = requests_commands.add_parser("validate", parents=[common], help="check a JSONL file of records")
    check.add_argument("file")
    trajectories = commands.add_parser("trajectories", help="the agents' trajectories, as ATIF")
    trajectories_commands = trajectories.add_subparsers(
        dest="trajectories_command", required=True, parser_class=_ArgumentParser
    )
    export = trajectories_commands.add_parser(
        "export", parents=[common], help="a run's trajectories as ATIF, one JSON document a line on stdout"
    )
    export.add_argument("run_id", help=_RUN_HELP)
    report = commands.add_parser(
        "report", parents=[common], help="a self-contained HTML report of a run (works offline)"
    )
    report.add_argument("run_id", help=_RUN_HELP)
    report.add_argument("--baseline", help="a run of the same dataset to compare with")
    report.add_argument("--out", help="the HTML file (default: <store>/reports/<run_id>.html)")
    clean = commands.add_parser(
        "clean", parents=[common], help="remove the Docker containers and networks runs left behind"
    )
    clean.add_argument("run_ids", nargs="*", metavar="RUN_ID", help="these runs' (default: with --all)")
    clean.add_argument("--all", action="store_true", help="every run's")
    show = commands.add_parser("show", parents=[common], help="a run's summary")
    show.add_argument("run_id", help=_RUN_HELP)
    show.add_argument("--name", help="only runs of this spec name: `latest` is its newest run")
    ui = commands.add_parser(
        "ui", help="a local Prefect server, every deployment and a worker (Ctrl-C stops)"
    )
    ui.add_argument("--port", type=int, default=4200, help="the server's port on 127.0.0.1 (default 4200)")
    ui.add_argument(
        "--store",
        help="the store of deployment runs that name none (default $ASSAY_STORE, else ./assay-store here)",
    )
    ui.add_argument("--home", help="PREFECT_HOME for the server and worker (default: Prefect's own)")
    ui.add_argument(
        "--logs", default=".assay-ui", help="where the server's and worker's logs go (default .assay-ui)"
    )
    ui.add_argument("-v", "--verbose", action="store_true", help="show Prefect's logs")
    ls = commands.add_parser("ls", parents=[common], help="recent runs")
    ls.add_argument("-n", "--limit", type=int, default=20, help="how many runs (default 20)")
    _add_label_commands(commands, common)
    _add_view(commands, common)
    return parser


# -- people's labels and the judge's agreement with them (assay/cli/_labels.py) --------------------


def _add_label_commands(commands: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:
    labels = commands.add_parser("labels", help="people's labels of a run's outputs")
    labels_commands = labels.add_subparsers(
        dest="labels_command", required=True, parser_class=_ArgumentParser
    )
    into = labels_commands.add_parser(
        "import", parents=[common], help="store a file of labels (CSV, JSONL or Parquet) as a new revision"
    )
    into.add_argument("file")
    into.add_argument("--run", help="the labelled run, for rows without run_id (" + _RUN_HELP + ")")
    into.add_argument("--scorer", help="the scorer judged, for rows without scorer")
    into.add_argument("--labeller", help="who labelled, for rows without labeller")
    out = labels_commands.add_parser(
        "export", parents=[common], help="a run's current labels as JSONL on stdout"
    )
    out.add_argument("run_id", help=_RUN_HELP)
    sample = labels_commands.add_parser(
        "sample", parents=[common], help="which items to label next: a reproducible task list"
    )
    sample.add_argument("run_id", help=_RUN_HELP)
    sample.add_argument("--scorer", required=True, help="the model-graded scorer to check")
    sample.add_argument(
        "--n", type=int, default=100, help="how many items (default 100; expected, for uncertain)"
    )
    sample.add_argument(
        "--strategy",
        choices=["random", "stratified", "uncertain"],
        default="random",
        help="uniform; equal shares per judge score; or more of the judge's uncertain items (weighted)",
    )
    sample.add_argument("--seed", type=int, default=0, help="the draw's seed (default 0)")
    sample.add_argument("--out", help="write the task list here (.csv or .jsonl) instead of stdout")
    agreement = commands.add_parser(
        "agreement", parents=[common], help="a judge scorer against people's labels, and its corrected mean"
    )
    agreement.add_argument("run_id", help=_RUN_HELP)
    agreement.add_argument("--scorer", required=True, help="the model-graded scorer")
    agreement.add_argument(
        "--scale",
        choices=["binary", "ordinal", "continuous"],
        help="the scores' scale (default: read from them)",
    )
    agreement.add_argument(
        "--by", metavar="ANNOTATION", help="the agreement per value of this item annotation too"
    )


def _add_view(commands: argparse._SubParsersAction[_ArgumentParser], common: argparse.ArgumentParser) -> None:
    """`assay view`: the local web app over a store (docs/view.md)."""
    view = commands.add_parser(
        "view", parents=[common], help="a local web app over the store: runs, items, compare (Ctrl-C stops)"
    )
    view.add_argument("--port", type=int, default=8484, help="the port (default 8484)")
    view.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to bind (default 127.0.0.1); one not loopback needs ASSAY_VIEW_TOKEN",
    )
