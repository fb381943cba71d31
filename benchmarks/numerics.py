"""How far a run's numbers depend on the machine beside the code: one ES run of the analytic loop (the optimizers
study's ES, 2-D, seed 42: 50 generations of 4) made in a fresh process under each of OpenBLAS's kernel choices and
with numpy's AVX512 paths off, each compared with this machine's own choice and with the records of the run first
shipped (2026-12-05, kept in history at cb34d8b).

    python benchmarks/numerics.py

OpenBLAS picks its kernels by CPU (`OPENBLAS_CORETYPE` overrides the pick); Haswell's and SkylakeX's sum in another
order, so the ES's mean drifts by an ulp within a few generations and the run follows another path from there. A
session's study.json records what it ran with (`sessions[].numerics`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
# the first shipped optimizers-analytic run (2026-12-05, on a host whose OpenBLAS took Haswell's kernels), in history
FIRST_RUN = "cb34d8b:docs/results/optimizers-analytic/generations.csv.gz"
FIRST_TRIALS = "cb34d8b:docs/results/optimizers-analytic/trials.csv"
SHIPPED_TRIALS = REPO / "docs" / "results" / "optimizers-analytic" / "trials.csv"  # its re-run (2026-12-06)
AVX512 = ("AVX512F AVX512CD AVX512_KNL AVX512_KNM AVX512_SKX AVX512_CLX AVX512_CNL AVX512_ICL AVX512_SPR X86_V4 "
          "AVX512VBMI2 AVX512BITALG AVX512BF16 AVX512FP16 AVX512VNNI AVX512IFMA AVX512VBMI AVX512VPOPCNTDQ")  # fmt: skip
SETUPS = {
    "this machine's choice": {},
    "OpenBLAS Haswell": {"OPENBLAS_CORETYPE": "Haswell"},
    "OpenBLAS Zen": {"OPENBLAS_CORETYPE": "Zen"},
    "OpenBLAS SkylakeX": {"OPENBLAS_CORETYPE": "SkylakeX"},
    "numpy without AVX512": {"NPY_DISABLE_CPU_FEATURES": AVX512},
}
ONE_RUN = """
import json
from bilevel_tune.core import metrics, outer
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.inner.analytic import AnalyticLoop
from bilevel_tune.study_data.definition import load_study
from bilevel_tune.tune_edge.trainable import Seeds, candidate_rules
from bilevel_tune.study_data.design import compile_design
from threadpoolctl import threadpool_info

study = load_study("optimizers").with_overrides(inner="analytic")
cell = next(c for c in compile_design(study).cells if c.seed == 42 and c.dims == 2 and dict(c.extra)["outer.optimizer"] == "es")
trial = for_cell(study, cell)
loop = AnalyticLoop(InnerLoopConfig.from_study(trial))
seeds = Seeds(cell.seed, trial.budget.eval_episodes, trial.budget.final_eval_seeds)
optimizer, settings = outer.chosen(trial)
state = optimizer.init(settings, cell.population, cell.dims, cell.seed)
best = []
for _ in range(cell.generations):
    candidates = optimizer.ask(state)
    loop.reset(candidate_rules(trial, cell.optimize_params, candidates), seeds.generation(state.generation), range(4))
    state, told = optimizer.tell(state, candidates, [o.objective for o in loop.evaluate(seeds.evaluation)])
    best.append(told[metrics.BEST_OBJECTIVE])
kernels = sorted({i.get("architecture") for i in threadpool_info() if i.get("user_api") == "blas"})
print(json.dumps({"best": best, "kernels": kernels}))
"""


def run(env: dict[str, str]) -> dict:
    out = subprocess.run([sys.executable, "-c", ONE_RUN], cwd=REPO, env={**os.environ, **env}, capture_output=True,
                         text=True, check=True)  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def differs(a, b) -> str:
    a, b = np.asarray(a), np.asarray(b)
    apart = np.flatnonzero(a != b)
    if not apart.size:
        return "equal, bit for bit"
    return f"apart from generation {apart[0]} (max |Δ| {np.abs(a - b).max():.1e})"


def kept(path: str) -> bytes:
    return subprocess.run(["git", "show", path], cwd=REPO, capture_output=True, check=True).stdout


def moved_trials() -> str:
    """The first run's trials against the same trials of the shipped re-run: how many final objectives moved."""
    import io

    import pandas as pd

    key = ["optimize_params", "seed", "optimizer"]
    first, again = pd.read_csv(io.BytesIO(kept(FIRST_TRIALS))), pd.read_csv(SHIPPED_TRIALS)
    both = first.merge(again, on=key, suffixes=("_first", "_again"))
    delta = (both["final_objective_first"] - both["final_objective_again"]).abs()
    return (f"the same {len(both)} trials in the shipped re-run: {int((delta > 0).sum())} final objectives moved, "
            f"by at most {delta.max():.4f}")  # fmt: skip


def main() -> None:
    import io

    import pandas as pd

    kept_run = kept(FIRST_RUN)
    shipped = pd.read_csv(io.BytesIO(kept_run), compression="gzip")
    shipped = shipped[(shipped["optimizer"] == "es") & (shipped["seed"] == 42) & (shipped["mechanism"] == "2-D")]
    shipped_best = shipped.sort_values("generation")["best_so_far"].to_numpy()
    runs = {name: run(env) for name, env in SETUPS.items()}
    own = runs["this machine's choice"]["best"]
    print(f"{'setup':24} {'BLAS kernels':22} {'vs this machine':44} vs the run of 2026-12-05")
    for name, result in runs.items():
        print(f"{name:24} {','.join(result['kernels']):22} {differs(result['best'], own):44} "
              f"{differs(result['best'], shipped_best)}")  # fmt: skip
    print(moved_trials())


if __name__ == "__main__":
    main()
