"""`python -m bilevel_tune.study`: the study's command line, which lives in `bilevel_tune.running.cli`."""

import sys

from bilevel_tune.running.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
