"""CLI: the `assay` command — run, resume, compare, show and list evals from a terminal.

Exit status: 0 ok, 1 a gate failed (or a crash: the run is recorded as failed), 2 bad input (spec,
dataset, flag, unknown run), 3 another process took over the run this one was driving, 4 what was
printed did not all reach stdout (its reader closed it), 130 interrupted (Ctrl-C or SIGTERM).

    _main       `main`: parse, dispatch, and every ending as an exit status
    _parser     the commands and their arguments; the exit statuses
    _flows      run, resume, rescore, compare, nightly: a flow, embedded or a Prefect flow run
    _commands   show, ls, report, estimate, power, leaderboard, requests, clean, ui
    _labels     labels import / export / sample, agreement: people's labels and the judge
    _output     `--json`, `--quiet`, or drawn for a person by
    _progress   the live progress bar (rich)
    _terminal   the tables a command prints when done (rich)
    _runs       a run named by its id, a unique prefix of one, or `latest` (`--name SPEC`)
    _view       `assay view`: the web app over a store, served until Ctrl-C
    _stdout     stdout that waits for a slow reader rather than dropping what it cannot take
"""

from assay.cli._main import main
from assay.cli._parser import EXIT_GATE, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_LOST, EXIT_OK, EXIT_OUTPUT

__all__ = ["EXIT_GATE", "EXIT_INPUT", "EXIT_INTERRUPTED", "EXIT_LOST", "EXIT_OK", "EXIT_OUTPUT", "main"]
