"""`python -m assay.cli`: the `assay` command."""

import sys

from assay.cli import main

sys.exit(main())
