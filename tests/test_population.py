"""The population APPO loop (`appo`) against RLlib's per-agent path (`appo-multiagent`).

Exactness is the contract: one stacked update equals N stock updates, and
untrained policies act identically; learning parity is checked at the
weekend's world and network.
"""

import pytest

from bilevel_tune.inner import InnerLoopConfig, ShardedInnerLoop
from bilevel_tune.worlds.fresh_water import Rules

pytestmark = pytest.mark.rllib  # RLlib is imported by the tests, not at collection

# Three candidates far apart, so their gradients differ enough to clip one and not another.
RULES = [
    Rules(fixed_quota=0.95, min_demand_frac=0.0, max_demand_frac=0.35),
    Rules(fixed_quota=0.6, min_demand_frac=0.35, max_demand_frac=1.0, risk_penalty_scale=1.0),
    Rules(fixed_quota=0.8, min_demand_frac=0.1, max_demand_frac=0.7, fine_amount=0.1),
]


@pytest.mark.ray
@pytest.mark.slow
def test_one_update_equals_separate_stock_updates_clipped_and_not(ray_cluster, tiny_inner):
    from bilevel_tune.appo.equivalence import update_equivalence

    report = update_equivalence(tiny_inner, RULES, seed=3)
    assert report.initial_weights_identical
    assert report.clipped_and_not, report
    assert report.equivalent, report
    assert all(c.gradient_difference < 1e-5 and c.max_abs_difference < 1e-5 for c in report.candidates)


@pytest.mark.ray
@pytest.mark.slow
def test_untrained_evaluation_equals_the_per_agent_loop_for_any_sharding(ray_cluster, tiny_inner):
    from bilevel_tune.appo.multiagent import MultiAgentPolicyLoop
    from bilevel_tune.appo.population import PopulationPolicyLoop

    rules = [r.as_dict() for r in RULES] + [Rules().as_dict()]
    outcomes = {}
    for loop_class in (MultiAgentPolicyLoop, PopulationPolicyLoop):
        loop = loop_class(tiny_inner)
        try:
            loop.reset(rules, seed=11, candidates=range(len(rules)))
            outcomes[loop_class.__name__] = loop.evaluate([4, 5])
        finally:
            loop.stop()
    assert outcomes["PopulationPolicyLoop"] == outcomes["MultiAgentPolicyLoop"]
    assert len({o.diagnostics["requested_fraction"] for o in outcomes["PopulationPolicyLoop"]}) == len(rules), (
        "weights of its own each"
    )
    for shards in (1, 2):
        with ShardedInnerLoop("appo", tiny_inner, shards=shards) as inner:
            assert inner.run(rules, seed=11, eval_seeds=[4, 5], inner_iters=0).outcomes == tuple(
                outcomes["PopulationPolicyLoop"]
            )
            # a scan's pass: each shard's block in turns of at most one candidate, each keeping its index
            in_turns = inner.run(rules, seed=11, eval_seeds=[4, 5], inner_iters=0, max_block=1)
            assert in_turns.outcomes == tuple(outcomes["PopulationPolicyLoop"]) and len(in_turns.shards) == shards


@pytest.mark.ray
@pytest.mark.slow
def test_learning_parity_at_the_weekend_world_and_network(ray_cluster):
    """K = 50 at fixed rules, 3 seeds each: the same reward as RLlib's per-agent path, and it rises from K = 0.

    The weekend's world and network (5 farms, 150 days, (256, 256)): in tiny worlds 50 iterations teach
    too little to tell learning from noise. Two candidates, so the stacked update is exercised.
    """
    import ray

    from bilevel_tune.appo.equivalence import learning_parity, parity_run

    rules = [Rules.at_unit({"min_demand_frac": u}, {"risk_penalty_scale": 1.0}) for u in (0.25, 0.75)]
    remote = ray.remote(num_cpus=1)(parity_run)  # both CPUs busy

    def on_ray(jobs):  # the per-agent loop's slower runs (listed last) first, so the two CPUs end together
        refs = {i: remote.remote(*jobs[i]) for i in reversed(range(len(jobs)))}
        return ray.get([refs[i] for i in range(len(jobs))])

    report = learning_parity(InnerLoopConfig(), rules, seeds=(1, 2, 3), inner_iters=50, runs=on_ray)
    print(report.summary())
    assert report.before["appo"] == report.before["appo-multiagent"]  # K = 0: identical policies, identical seasons
    assert report.rises, report.summary()
    assert report.within_seed_noise, report.summary()


@pytest.mark.parametrize(
    "setting, words",
    [
        ({"use_kl_loss": True}, "use_kl_loss adapts one KL coefficient"),
        ({"grad_clip_by": "norm"}, "grad_clip_by='norm'"),
        ({"minibatch_size": 10}, "minibatch_size slices"),
    ],
)
def test_settings_that_would_couple_candidates_are_refused_in_one_line(tiny_inner, setting, words):
    from bilevel_tune.appo.population import CouplingSettingError, refuse_coupling_settings
    from bilevel_tune.appo.rllib_config import appo_config

    refuse_coupling_settings(appo_config(tiny_inner, seed=0))  # the defaults are fine
    refuse_coupling_settings(appo_config(tiny_inner, seed=0).training(grad_clip_by="value"))  # elementwise
    with pytest.raises(CouplingSettingError, match=words) as refused:
        refuse_coupling_settings(appo_config(tiny_inner, seed=0).training(**setting))
    assert "\n" not in str(refused.value) and "appo-multiagent" in str(refused.value)
