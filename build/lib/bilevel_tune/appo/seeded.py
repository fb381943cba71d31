"""RLlib's stock APPO module with per-candidate initial weights (`SeededAPPOModule`).

RLlib seeds torch once per Algorithm build and builds modules in order, so
the j-th module of a block would get the same weights in every block.
Seeding each module's own setup (in a forked RNG, so exploration's stream
is untouched) with `candidate_seed(generation seed, k)` makes candidate
k's initial weights a function of (generation seed, k) alone: the same in
any shard, and the same in both APPO loops (the population module copies
them in).
"""

from __future__ import annotations

INIT_SEED = "bilevel_init_seed"  # model_config key: the seed of a module's initial weights

_SEEDED_MODULE_CLASS = None


def seeded_module_class() -> type:
    """RLlib's default APPO torch module, its weights initialised from the seed in its model_config."""
    global _SEEDED_MODULE_CLASS
    if _SEEDED_MODULE_CLASS is None:
        import torch
        from ray.rllib.algorithms.appo import APPOConfig

        base = APPOConfig().framework("torch").get_default_rl_module_spec().module_class

        def setup(self):
            seed = (self.model_config or {}).get(INIT_SEED)
            with torch.random.fork_rng(devices=[]):
                if seed is not None:
                    torch.manual_seed(int(seed))
                base.setup(self)

        cls = type("SeededAPPOModule", (base,), {"setup": setup, "__module__": __name__})
        globals()["SeededAPPOModule"] = _SEEDED_MODULE_CLASS = cls  # findable by name, should RLlib pickle it
    return _SEEDED_MODULE_CLASS
