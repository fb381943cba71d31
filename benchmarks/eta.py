"""The dry run's ETA against the real wall time of the same command.

    python benchmarks/eta.py                                   # `make study`'s command
    python benchmarks/eta.py -- weekend --quick --inner analytic --wandb disabled

Runs `--dry-run` (timing it: ≤ 30 s is the promise), then the command
itself, each in a fresh process, and prints both, their ratio, and the
overheads the real run measured (what the next dry run on this machine
uses). The calibration store starts empty unless --keep-store, as on a
fresh machine. Its last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MAKE_STUDY = ["weekend", "--quick", "--wandb", "offline"]
ETA = re.compile(r"ETA ((\d+) days?, )?(\d+):(\d\d):(\d\d)")


def seconds_of(line: str) -> float:
    m = ETA.search(line)
    return int(m[2] or 0) * 86400 + int(m[3]) * 3600 + int(m[4]) * 60 + int(m[5])


def study(args: list[str], env: dict) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bilevel_tune.study", *args], capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"{' '.join(args)} exited {done.returncode}: {done.stdout[-2000:]}{done.stderr[-2000:]}")
    return time.perf_counter() - start, done.stdout


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep-store", action="store_true", help="use this machine's calibration store as it is")
    parser.add_argument("study_args", nargs="*", help="the study command's arguments (default: make study's)")
    args = parser.parse_args(argv)
    command = args.study_args or MAKE_STUDY
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ)
        if not args.keep_store:
            env["BILEVEL_CACHE_DIR"] = str(Path(tmp, "calibration"))
        dry_wall, dry = study([*command, "--dry-run"], env)
        eta_line = [line for line in dry.splitlines() if "ETA" in line][-1]
        eta = seconds_of(eta_line)
        print(f"dry run: {dry_wall:.1f} s; {eta_line}", flush=True)
        wall, _ = study([*command, "--results", str(Path(tmp, "results"))], env)
        print(f"real run: {wall:.1f} s wall; ETA / wall = {eta / wall:.3f}")
        store = Path(env.get("BILEVEL_CACHE_DIR", "")) / "calibration.json"
        learned = json.loads(store.read_text()).get("overheads", {}) if store.is_file() else {}
        for entry in learned.values():
            print("overheads measured by the real run: " + json.dumps(entry))
    print(
        json.dumps(
            {
                "command": " ".join(command),
                "dry_run_s": round(dry_wall, 1),
                "eta_s": eta,
                "wall_s": round(wall, 1),
                "eta_over_wall": round(eta / wall, 3),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
