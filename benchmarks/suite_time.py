"""`make test`'s wall on this machine: its two lanes at once (tests/lanes.py), each lane's wall and tests, and how
busy the CPUs were; with --one-lane, one pytest over every test for comparison.

    python benchmarks/suite_time.py [--one-lane]

Run it on a quiet machine from the repository root, in the project's virtualenv (`make setup`); it takes what the
suite takes (minutes). Every lane runs with WANDB_MODE=offline, as `make test` runs it.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
OUTCOME = re.compile(r"^=*\s*(\d+ (?:passed|failed).*?) in [\d.]+s", re.M)  # pytest's last line, -q or not


def cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs since boot (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:9]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


class Lane:
    def __init__(self, name: str, args: list[str]):
        self.name, self.start = name, time.perf_counter()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
            cwd=REPO, env={**os.environ, "WANDB_MODE": "offline"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True,
        )  # fmt: skip
        self.out, self.wall = "", 0.0
        self.thread = threading.Thread(target=self._wait)
        self.thread.start()

    def _wait(self) -> None:
        self.out, _ = self.proc.communicate()
        self.wall = time.perf_counter() - self.start

    def line(self) -> str:
        self.thread.join()
        found = OUTCOME.findall(self.out)
        outcome = found[-1] if found else f"no pytest summary (exit {self.proc.returncode})"
        return f"{self.name:<12} {self.wall / 60:5.1f} min ({int(self.wall) // 60}:{int(self.wall) % 60:02d})  {outcome}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--one-lane", action="store_true", help="one pytest over every test instead of the two lanes")
    args = parser.parse_args()
    busy0, total0 = cpu_times()
    start = time.perf_counter()
    if args.one_lane:
        lanes = [Lane("one lane", [])]
    else:
        lanes = [Lane(f"lane {name}", ["--lane", name]) for name in ("shared", "own")]
    lines = [lane.line() for lane in lanes]
    wall = time.perf_counter() - start
    busy1, total1 = cpu_times()
    print(f"make test on {os.cpu_count()} CPUs, {'one pytest' if args.one_lane else 'two lanes at once'}:")
    for line in lines:
        print("  " + line)
    for lane in lanes:  # what failed, as pytest's short summary names it
        for failed in (x for x in lane.out.splitlines() if x.startswith(("FAILED ", "ERROR "))):
            print(f"  {lane.name}: {failed}")
    print(f"  wall {int(wall) // 60}:{int(wall) % 60:02d}; the CPUs {100 * (busy1 - busy0) / (total1 - total0):.0f} % busy")
    return max(lane.proc.returncode for lane in lanes)


if __name__ == "__main__":
    sys.exit(main())
