"""The APPO inner loops: real RLlib APPO, rebuilt every generation, leak-free (docs/inner-loop.md).

    appo             population.PopulationPolicyLoop    one module for the whole block (fast)
    appo-multiagent  multiagent.MultiAgentPolicyLoop    RLlib's per-agent path (the reference)

Shared: `algorithm` (APPO's settings, building, the leak-free stop),
`loop` (the generation cycle), `seeded` (per-candidate initial weights).
The population loop's RLlib pieces: `module`, `env_runner`, `batch`, `learner`.
"""

from bilevel_tune.runtime.ray_init import cap_torch_threads

cap_torch_threads()  # before RLlib starts torch's pools: in a Ray worker, at the study's cap (ray_init)

from bilevel_tune.appo.population import PopulationPolicyLoop  # noqa: E402 - after the cap

PolicyLoop = PopulationPolicyLoop  # its name until this release: a study file's inner = "bilevel_tune.appo:PolicyLoop" still loads

__all__ = ["PolicyLoop", "PopulationPolicyLoop"]
