"""The quickstart's stand-in model (examples/quickstart/solver.py), answering the same questions."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location(
    "quickstart_solver", Path(__file__).parents[1] / "quickstart" / "solver.py"
)
assert _spec is not None and _spec.loader is not None
_solver = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_solver)
solve = _solver.solve
