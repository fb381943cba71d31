"""How often AdaStop declares identical agents different: the released package against the corrected comparator.

    python benchmarks/adastop_error.py [--studies 400]

Simulated studies whose agents all draw from one normal distribution, run look by look as a study's stages
are (n scores per agent per look, K looks at most, stopping when every comparison is decided); a study errs
when it declares any pair different. The family-wise error should stay at or below α = 0.05. The `adastop`
0.1.3 package tests the absolute mean difference against the permutation distribution of the signed one,
and a rounding error can break its tie with the largest permutation; `verdicts.adastop.two_sided_adastop`
corrects both. Prints one line per setting and one JSON line.
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from adastop import MultipleAgentsComparator

from bilevel_tune.verdicts.adastop import two_sided_adastop

SETTINGS = ((5, 1, 2), (2, 3, 2), (2, 3, 4), (3, 2, 3))  # (n per look, K looks, agents)
ALPHA = 0.05


def error_rate(make, n: int, looks: int, agents: int, studies: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    wrong = 0
    for i in range(studies):
        comparator = make(n=n, K=looks, B=10_000, alpha=ALPHA, seed=i)
        scores = {f"agent{j}": np.array([]) for j in range(agents)}
        for _ in range(looks):
            for name in scores:
                scores[name] = np.concatenate([scores[name], rng.normal(0.0, 1.0, n)])
            comparator.partial_compare(scores, verbose=False)
            if comparator.is_finished:
                break
        wrong += any(d in ("larger", "smaller") for d in comparator.decisions.values())
    return wrong / studies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--studies", type=int, default=400)
    args = parser.parse_args()
    out = {}
    for n, looks, agents in SETTINGS:
        released = error_rate(MultipleAgentsComparator, n, looks, agents, args.studies, seed=1)
        corrected = error_rate(two_sided_adastop, n, looks, agents, args.studies, seed=1)
        print(
            f"n {n}, K {looks}, {agents} agents, {args.studies} null studies: released package {released:.3f}, "
            f"corrected {corrected:.3f} (α {ALPHA})"
        )
        out[f"n{n}_K{looks}_agents{agents}"] = {"released": released, "corrected": corrected}
    print(json.dumps(out))


if __name__ == "__main__":
    main()
