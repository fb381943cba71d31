"""The objective's upper bound against a brute force over the requested fraction."""

import json

import numpy as np
import pytest

from bilevel_tune.study_data.run_folder import json_safe
from bilevel_tune.worlds.contract import Assessment
from bilevel_tune.worlds.fresh_water import Basin, Rules, WorldConfig, stack_days
from bilevel_tune.worlds.fresh_water.objective import (
    ObjectiveWeights,
    assess,
    day_reward_for_fraction,
    day_upper_bound,
    sustainability,
)

FINE_GRID = np.linspace(0.0, 1.0, 200_001)


def brute_force(need, rain, allowed, pressure, fine, scale, power):
    grid = np.append(FINE_GRID, allowed)  # the kink at f = a is rarely on the grid
    return day_reward_for_fraction(grid, need, rain, allowed, pressure, fine, scale, power).max()


def test_the_structural_quarter():
    # pressure 1, no rain, slack quota, scale 1, power 2: max_f f − f² = 1/4 at f = 1/2
    assert day_upper_bound(5.0, 0.0, 1.0, 1.0, 0.05, 1.0, 2.0) == pytest.approx(0.25, abs=1e-15)
    assert brute_force(5.0, 0.0, 1.0, 1.0, 0.05, 1.0, 2.0) == pytest.approx(0.25, abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_upper_bound_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    for _ in range(40):
        need = rng.choice([0.0, rng.uniform(0.1, 8)])
        rain = rng.choice([0.0, rng.uniform(0, 10)])
        args = (
            need,
            rain,
            rng.uniform(0, 1),
            rng.choice([0.6, 1.0, rng.uniform()]),
            rng.uniform(0, 0.1),
            rng.uniform(0, 1),
            rng.uniform(1, 5),
        )
        assert day_upper_bound(*args) == pytest.approx(brute_force(*args), abs=1e-6)
        assert day_upper_bound(*args) >= brute_force(*args) - 1e-12


def test_sustainability_is_one_for_the_baseline_itself():
    assert sustainability([0.8, 0.7], [0.8, 0.7]) == 1.0
    assert sustainability([0.6, 0.7], [0.8, 0.7]) == pytest.approx(1 / (1 + 0.2 / 1.5))


def test_an_assessment_bounds_the_objective():
    rules = [Rules(risk_penalty_scale=1.0), Rules(fixed_quota=0.95, min_demand_frac=0.0)]
    basin = Basin(WorldConfig(num_farms=3, horizon=60), rules)
    episodes = []
    for seed in (1, 2):
        basin.reset(np.random.default_rng(seed))
        days = [basin.step(np.full((2, 3), 0.5)) for _ in range(60)]
        episodes.append(stack_days(days))
    out = assess(episodes, rules, ObjectiveWeights(), basin.failed)
    for o in out:
        assert o.objective <= o.upper_bound + 1e-12
        assert o.diagnostics["requested_fraction"] == pytest.approx(0.5)
    mixed = assess(episodes, rules, ObjectiveWeights(econ=1.0, sus=0.5), np.array([False, True]))
    assert mixed[0].objective == pytest.approx(out[0].terms["mean_reward"] + 0.5 * out[0].terms["sustainability"])
    assert np.isnan(mixed[1].objective)
    # through a record: the failed candidate's NaN is written as null and read back as NaN, every number kept
    record = mixed[1].as_dict()
    back = Assessment.from_dict(json.loads(json.dumps(json_safe(record))))
    assert np.isnan(back.objective) and back.failed and back.upper_bound == record["upper_bound"]
    assert back.as_dict().keys() == record.keys() and back.bound_by_rule == record["bound_by_rule"]


def test_weights_are_validated():
    with pytest.raises(ValueError, match="both 0"):
        ObjectiveWeights(0, 0)
    with pytest.raises(ValueError, match="sus=-1"):
        ObjectiveWeights(1, -1)


def test_bound_by_rule_names_the_rules_that_lift_the_quarter():
    """In the capped regime the bound is 1/4; only the flow penalty's rules can lift it, not the fine or the quota's."""
    world = WorldConfig(release_share=1.0, rain_probability=0.0, farm_area_km2=5.0)
    rules = [Rules(fixed_quota=0.6, min_demand_frac=0.35, risk_penalty_scale=1.0, risk_penalty_power=2.0)]
    basin = Basin(world, rules)
    basin.reset(np.random.default_rng(3))
    days = []
    while not basin.done:
        days.append(basin.step(np.full((1, 5), 0.5)))
    (out,) = assess([stack_days(days)], rules, ObjectiveWeights(), basin.failed, world.smoothing)
    assert out.upper_bound == pytest.approx(0.25, abs=1e-12) and out.objective == pytest.approx(0.25, abs=1e-12)
    lifted = {rule for rule, bound in out.bound_by_rule.items() if bound > out.upper_bound + 1e-4}
    assert lifted == {"risk_penalty_scale", "risk_penalty_power"}
    assert out.bound_by_rule["risk_penalty_scale"] > 0.5  # c = 0: request all that is allowed, a ≥ 1/2
    assert out.bound_by_rule["fine_amount"] == out.bound_by_rule["fixed_quota"] == out.upper_bound


def test_an_outcome_recorded_before_bound_by_rule_still_reads():
    fields = {name: 0.1 for name in ("objective", "mean_reward", "sustainability", "upper_bound", "pressure")}
    old = Assessment.from_dict({**fields, "failed": False})
    assert old.bound_by_rule == {} and old.objective == 0.1 and old.diagnostics["pressure"] == 0.1
