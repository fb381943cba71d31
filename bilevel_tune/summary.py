"""`python -m bilevel_tune.summary RUN_DIR` and the summary's public names (its verdicts among them), which live in `bilevel_tune.report.outputs`."""

import sys

from bilevel_tune.report.outputs import *  # noqa: F403 - this path's public names, as before the move
from bilevel_tune.report.outputs import main

if __name__ == "__main__":
    sys.exit(main())
