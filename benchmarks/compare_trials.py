"""Did a change move any trial's numbers? Two runs' trials.csv, column by column.

    python benchmarks/compare_trials.py RUN_A RUN_B

Run the same study (say `weekend --quick --inner analytic`) on two checkouts
(`PYTHONPATH=<the other checkout>`), then compare: every column both tables
hold is checked for equal values, bit for bit, but the ones that are the
machine's (trial ids, seconds, threads). Prints the columns only one has, the
columns that differ and one JSON line; exit 1 when a shared column differs.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

THE_MACHINES = ("trial", "median_sec_per_gen", "max_threads", "wall_s")


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__.splitlines()[2].strip(), file=sys.stderr)
        return 2
    a, b = (pd.read_csv(Path(run) / "trials.csv") for run in argv)
    shared = [c for c in a.columns if c in b.columns and c not in THE_MACHINES]
    differ = [c for c in shared if not a[c].equals(b[c])]
    print(f"only in {argv[0]}: {sorted(set(a.columns) - set(b.columns))}")
    print(f"only in {argv[1]}: {sorted(set(b.columns) - set(a.columns))}")
    print(f"{len(shared)} shared columns; differing: {differ}")
    print(json.dumps({"rows": [len(a), len(b)], "shared": len(shared), "differing": differ}))
    return 1 if differ or len(a) != len(b) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
