"""The numpy world, hand-checked against docs/world.md."""

import numpy as np
import pytest

from bilevel_tune.study_data.settings import settings_table
from bilevel_tune.worlds.fresh_water import Basin, Rules, WorldConfig, crops, hydrology, law, stack_days
from bilevel_tune.worlds.fresh_water.hydrology import CAPACITY_M3, SECONDS_PER_DAY
from bilevel_tune.worlds.fresh_water.rules import RULE_NAMES, rule_spec


def test_july_reference_et_at_45n():
    july_15 = 196
    assert crops.reference_et_mm(july_15) == pytest.approx(0.34 * (0.46 * 23 + 8))
    assert crops.reference_et_mm(july_15) == pytest.approx(6.3172)
    assert crops.reference_et_mm(1) == pytest.approx(0.20 * (0.46 * -5 + 8))
    assert crops.reference_et_mm(365) == pytest.approx(0.20 * (0.46 * -2 + 8))


def test_crop_coefficient_stages_and_wrap():
    assert [crops.crop_coefficient(d) for d in (0, 30, 31, 70, 71, 110, 111, 150, 151)] == [
        0.40,
        0.40,
        0.80,
        0.80,
        1.15,
        1.15,
        0.70,
        0.70,
        0.0,
    ]
    assert crops.day_of_year(360, 10) == 5


def test_stress_and_allowed_fraction_at_the_kinks():
    q, m, big_m = 0.8, 0.1, 0.9
    assert law.stress(q, q) == 0.0
    assert law.stress(1.0, q) == 1.0
    assert law.allowed_fraction(q, q, m, big_m) == pytest.approx(m)
    assert law.allowed_fraction(0.5, q, m, big_m) == pytest.approx(m)  # below the quota level: floor only
    assert law.allowed_fraction(1.0, q, m, big_m) == pytest.approx(big_m)
    assert law.allowed_fraction(0.9, q, m, big_m) == pytest.approx(m + 0.5 * (big_m - m))


def test_max_below_min_is_lifted_to_min():
    assert law.allowed_fraction(1.0, 0.8, min_demand_frac=0.3, max_demand_frac=0.1) == pytest.approx(0.3)


def test_quota_penalty_zero_without_deficit_and_capped_at_one():
    assert law.quota_penalty(5.0, 0.0, 0.0, fine_amount=0.1) == 0.0
    assert law.quota_penalty(100.0, 0.0, 1.0, fine_amount=0.1) == 1.0
    assert law.quota_penalty(3.0, 1.0, 10.0, fine_amount=0.1) == pytest.approx(0.02)


def test_smoothing_tends_to_the_hard_ramp():
    levels = np.linspace(0, 1, 201)
    hard = law.stress(levels, 0.8)
    gaps = [np.abs(law.stress(levels, 0.8, smoothing=w) - hard).max() for w in (0.1, 0.01, 0.001, 1e-5)]
    assert gaps == sorted(gaps, reverse=True)
    assert gaps[-1] < 1e-4


def run_episode(basin, fractions_fn, seed=0):
    basin.reset(np.random.default_rng(seed))
    days = []
    while not basin.done:
        days.append(basin.step(fractions_fn(basin)))
    return days


def assert_water_balance(days):
    for d in days:
        change = d.level * CAPACITY_M3 - d.volume_start_m3
        flows = (d.inflow_m3s - d.withdrawal_m3s - d.release_m3s - d.spill_m3s) * SECONDS_PER_DAY
        np.testing.assert_allclose(change, flows, rtol=0, atol=1e-9 * CAPACITY_M3)
        assert min(d.withdrawal_m3s.min(), d.release_m3s.min(), d.spill_m3s.min(), d.level.min()) >= 0


def test_water_balance_through_a_dry_spell_with_cut_withdrawals():
    # A greedy, unregulated farm sector empties the lake: withdrawals must be cut.
    greedy = Rules(fixed_quota=0.6, min_demand_frac=1.0, max_demand_frac=1.0)
    basin = Basin(WorldConfig(num_farms=5, horizon=150), [greedy])
    days = run_episode(basin, lambda b: np.ones((1, 5)))
    assert_water_balance(days)
    assert min(d.level.min() for d in days) < 0.05, "the dry spell should nearly empty the lake"
    deficit_m3 = [d.deficit_mm / 1000 * 5e8 for d in days]
    cut = [d.delivered_m3.sum() < 0.99 * want for d, want in zip(days, deficit_m3) if want > 0]
    assert any(cut), "some day's withdrawals should have been cut"


def test_water_balance_through_a_spill():
    day = hydrology.step_lake(CAPACITY_M3, inflow=50.0, requested_m3=0.0)
    assert day.spill == pytest.approx(0.4 * 50.0)
    assert day.volume == pytest.approx(CAPACITY_M3)
    assert day.pressure(50.0) == 1.0
    change = day.volume - CAPACITY_M3
    assert change == pytest.approx((50.0 - day.withdrawal - day.release - day.spill) * SECONDS_PER_DAY, rel=1e-9)


def test_lake_cannot_give_water_it_does_not_have():
    day = hydrology.step_lake(volume=1000.0, inflow=0.01, requested_m3=1e6)
    assert day.withdrawal * SECONDS_PER_DAY == pytest.approx(1000.0 + 0.01 * SECONDS_PER_DAY)
    assert day.volume == pytest.approx(0.0, abs=1e-6)
    assert day.release == pytest.approx(0.0, abs=1e-12)


def test_baseline_lake_never_sees_withdrawals():
    rules = [Rules(min_demand_frac=0.35, max_demand_frac=1.0, fixed_quota=0.6)]
    heavy = run_episode(Basin(WorldConfig(), rules), lambda b: np.ones((1, 5)), seed=3)
    light = run_episode(Basin(WorldConfig(), rules), lambda b: np.zeros((1, 5)), seed=3)
    np.testing.assert_array_equal([d.baseline_level for d in heavy], [d.baseline_level for d in light])
    np.testing.assert_allclose([d.level[0] for d in light], [d.baseline_level for d in light], rtol=1e-12)
    assert heavy[-1].level[0] < light[-1].level[0]


def test_same_seed_same_trajectory():
    def levels(seed):
        rng = np.random.default_rng(99)
        return stack_days(run_episode(Basin(WorldConfig(), [Rules()] * 2), lambda b: rng.random((2, 5)), seed))

    a, b, c = levels(7), levels(7), levels(8)
    for key in a:
        np.testing.assert_array_equal(a[key], b[key])
    assert not np.array_equal(a["level"], c["level"])


def test_candidate_lakes_respond_only_to_their_own_rules():
    tight, loose = Rules(min_demand_frac=0.0, max_demand_frac=0.35), Rules(min_demand_frac=0.35, max_demand_frac=1.0)
    full = lambda b: np.ones((b.population, 5))  # noqa: E731
    alone = stack_days(run_episode(Basin(WorldConfig(), [tight]), full, seed=5))
    paired = stack_days(run_episode(Basin(WorldConfig(), [tight, loose]), full, seed=5))
    np.testing.assert_array_equal(alone["level"][:, 0], paired["level"][:, 0])
    np.testing.assert_array_equal(alone["reward"][:, 0], paired["reward"][:, 0])
    assert paired["delivered_m3"][:, 1].sum() > paired["delivered_m3"][:, 0].sum()


def test_reward_never_exceeds_one():
    rng = np.random.default_rng(0)
    days = stack_days(
        run_episode(Basin(WorldConfig(), [Rules(), Rules(risk_penalty_scale=0.0)]), lambda b: rng.random((2, 5)))
    )
    assert np.all(days["reward"] <= 1.0) and np.all(np.isfinite(days["reward"]))


def test_a_failing_candidate_is_isolated():
    basin = Basin(WorldConfig(horizon=5), [Rules(), Rules()])

    def actions(b):
        f = np.full((2, 5), 0.5)
        f[1, 2] = np.nan
        return f

    days = run_episode(basin, actions)
    assert basin.failed.tolist() == [False, True]
    assert np.all(np.isfinite(basin.observe()))
    assert np.isfinite(days[-1].reward[0]).all()


def test_unknown_rule_and_out_of_range_u_name_the_problem():
    with pytest.raises(ValueError, match=r"unknown rule 'min_demand'.*did you mean 'min_demand_frac'.*fixed_quota"):
        rule_spec("min_demand")
    with pytest.raises(ValueError, match=r"fine_amount.*u=1.2.*outside \[0, 1\]"):
        Rules.at_unit({"fine_amount": 1.2})
    with pytest.raises(ValueError, match="unknown rule 'quota'"):
        settings_table().check_params(["quota"])
    with pytest.raises(ValueError, match="repeats"):
        settings_table().check_params(["fixed_quota", "fixed_quota"])


def test_rule_maps_and_defaults():
    assert Rules.at_unit({"min_demand_frac": 1.0, "fixed_quota": 0.0}).as_dict() == {
        **Rules().as_dict(),
        "min_demand_frac": 0.35,
        "fixed_quota": 0.6,
    }
    for name in RULE_NAMES:
        spec = rule_spec(name)
        assert spec.to_physical(spec.to_unit(spec.default)) == pytest.approx(spec.default)
        assert spec.low <= spec.default <= spec.high
    with pytest.raises(ValueError):
        WorldConfig(num_farms=0)


def test_the_ceiling_regimes_knobs_saturate_pressure_stop_the_rain_and_shrink_the_demand():
    rules = [Rules(fixed_quota=0.6, min_demand_frac=0.35, risk_penalty_scale=1.0)]
    half = lambda b: np.full((1, 5), 0.5)  # noqa: E731
    weekend = stack_days(run_episode(Basin(WorldConfig(), rules), half, seed=4))
    campaign = WorldConfig(release_share=1.0, rain_probability=0.0, farm_area_km2=5.0)
    dry = stack_days(run_episode(Basin(campaign, rules), half, seed=4))
    assert (weekend["rain_mm"] > 0).any() and (dry["rain_mm"] == 0).all()
    assert np.array_equal(weekend["inflow_m3s"], dry["inflow_m3s"])  # the weather's stream is kept
    assert (dry["pressure"] == 1.0).all() and (weekend["pressure"] < 1.0).any()
    # 5 km² of farms at f = 1/2 draw a few % of the lake; 500 km² drain it
    assert dry["level"][-1, 0] > dry["volume_start_m3"][0, 0] / CAPACITY_M3 - 0.05
    assert weekend["level"][-1, 0] < 0.5
    # every day: a ≥ 1/2, so f = 1/2 is delivered in full and earns f − f² = 1/4
    assert (dry["allowed_fraction"] >= 0.5).all() and np.allclose(dry["reward"], 0.25, atol=1e-12)


@pytest.mark.parametrize(
    "field, value", [("release_share", 1.5), ("rain_probability", -0.1), ("rain_mean_mm", np.nan), ("farm_area_km2", 0)]
)
def test_world_knobs_out_of_range_are_refused(field, value):
    with pytest.raises(ValueError, match=field):
        WorldConfig(**{field: value})
