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

_SEEDED_MODULE_CLASSES: dict[str, type] = {}


def seeded_module_class(algorithm: str = "APPO") -> type:
    """RLlib's default torch module of an algorithm (APPO, or PPO for the held-out learner), its weights initialised
    from the seed in its model_config."""
    if algorithm not in _SEEDED_MODULE_CLASSES:
        import torch
        from ray.rllib.algorithms.appo import APPOConfig
        from ray.rllib.algorithms.ppo import PPOConfig

        config = {"APPO": APPOConfig, "PPO": PPOConfig}[algorithm]()
        base = config.framework("torch").get_default_rl_module_spec().module_class

        def setup(self):
            seed = (self.model_config or {}).get(INIT_SEED)
            with torch.random.fork_rng(devices=[]):
                if seed is not None:
                    torch.manual_seed(int(seed))
                base.setup(self)

        name = f"Seeded{algorithm}Module"
        cls = type(name, (base,), {"setup": setup, "__module__": __name__})
        globals()[name] = _SEEDED_MODULE_CLASSES[algorithm] = cls  # findable by name, should RLlib pickle it
    return _SEEDED_MODULE_CLASSES[algorithm]
