"""Assay's tests (run with pytest: README, "Two commands")."""

import sys

# The fast loop runs again and again: keep the compiled test modules (pytest's assertion
# rewrites) and Assay's own modules even where PYTHONDONTWRITEBYTECODE is set, as on this
# project's machines: compiling them again costs each test process ~5 s of CPU a run. Imported
# before conftest, so all but pytest itself is kept; __pycache__ is ignored by git.
sys.dont_write_bytecode = False
