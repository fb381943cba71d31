"""`python -m bilevel_tune.study`: the study's command line, which lives in `bilevel_tune.cli.main`."""

import sys

from bilevel_tune.cli.main import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
