"""`python -m bilevel_tune.summary RUN_DIR` (`cli/summary_command.py`), and the summary's public names (its verdicts
among them), which live in `bilevel_tune.report.outputs`."""

import sys

from bilevel_tune.cli.summary_command import main
from bilevel_tune.report.outputs import *  # noqa: F403 - this path's public names, as before the move

if __name__ == "__main__":
    sys.exit(main())
