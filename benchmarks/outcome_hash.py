"""A fingerprint of K = 0 outcomes (analytic, appo, appo-multiagent) at the weekend and the ceiling worlds.

    python benchmarks/outcome_hash.py [analytic] [appo] [appo-multiagent] [--train K] [--streams lake|block]
    PYTHONPATH=/path/to/an/older/checkout python benchmarks/outcome_hash.py analytic appo appo-multiagent

Six random rule sets over the rules' whole ranges, evaluated untrained on two seeds by each loop.
It reaches the loops only through paths older releases have too (`bilevel_tune.inner`,
`bilevel_tune.worlds.fresh_water.rules`), so the same command on two checkouts says whether a change kept every
evaluation bit-identical: equal fingerprints, equal outcomes to the last bit.

`--train K` trains each block K times before it is evaluated (the trained hash: exploration and learning too);
`--streams` sets the loops' random streams (`InnerLoopConfig.streams`; a checkout from before lakes has none: leave
it out there, block streams are what it drew).
"""

from __future__ import annotations

import argparse
import hashlib
import json

import numpy as np

from bilevel_tune.inner import InnerLoopConfig, load_loop_class
from bilevel_tune.worlds.fresh_water import WorldConfig
from bilevel_tune.worlds.fresh_water.rules import RULE_SPECS

WORLDS = {
    "weekend": {},
    "ceiling": dict(release_share=1.0, rain_probability=0.0, farm_area_km2=5.0),
}
SMALL = ({"hidden": (16,)}, {"horizon": 40})  # the APPO loops: an untrained policy's outcomes, quickly


def outcomes(loop: str, world: dict, rules: list[dict], train: int = 0, streams: dict | None = None) -> list[dict]:
    network, season = ({}, {}) if loop == "analytic" else SMALL
    config = InnerLoopConfig(**network, **(streams or {}), world_settings=WorldConfig(**world, **season))
    inner = load_loop_class(loop)(config)
    inner.reset(rules, 7, range(len(rules)))
    for _ in range(train):
        inner.train()
    found = inner.evaluate([100, 101])
    inner.stop()
    return [o.as_dict() if hasattr(o, "as_dict") else o.__dict__ for o in found]


def main(loops: list[str], train: int, streams: str | None) -> None:
    rng = np.random.default_rng(0)
    rules = [{r.name: float(r.low + (r.high - r.low) * rng.random()) for r in RULE_SPECS} for _ in range(6)]
    chosen = {"streams": streams} if streams else {}
    found = {
        f"{loop}/{name}": outcomes(loop, world, rules, train, chosen) for loop in loops for name, world in WORLDS.items()
    }
    fingerprint = hashlib.sha256(json.dumps(found, sort_keys=True, default=float).encode()).hexdigest()[:16]
    means = {key: round(float(np.mean([o["objective"] for o in v])), 6) for key, v in found.items()}
    print(json.dumps({"fingerprint": fingerprint, "mean_objective": means}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("loops", nargs="*", default=["analytic"])
    parser.add_argument("--train", type=int, default=0, help="train() calls before the evaluation (default 0)")
    parser.add_argument("--streams", choices=("lake", "block"), help="the loops' random streams (default: theirs)")
    args = parser.parse_args()
    main(args.loops, args.train, args.streams)
