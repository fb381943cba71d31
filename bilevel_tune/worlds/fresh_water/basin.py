"""The fresh-water basin: one lake per candidate rule set, plus a baseline.

`Basin` is the numpy core the RLlib env wraps. It steps `population`
independent candidate lakes, each with `num_farms` farms under that
candidate's rules, and one no-withdrawal baseline lake. All lakes of an
episode share one weather draw (common random numbers): candidates are
compared on the same season, and the baseline sees exactly that weather.

Reset with one generator per lake instead (`worlds.lakes`: a block of lakes
of several seeds), each lake has the weather of its own stream — lakes given
the same generator share it, drawn once — and a baseline of its own: a day's
weather and baseline are then logged per lake, (N,), not as one number. A
lake's numbers are the same either way: its stream's weather is drawn by the
same scalar code, and the rest is elementwise.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Sequence

import numpy as np

from bilevel_tune.base.knobs import check_knobs, knob
from bilevel_tune.worlds.contract import rule_columns, unit_rules
from bilevel_tune.worlds.fresh_water import crops, hydrology, law
from bilevel_tune.worlds.fresh_water.rules import RULE_NAMES, RULE_SPECS, Rules

TOTAL_FARM_AREA_KM2 = 500.0  # the default of WorldConfig.farm_area_km2
PEAK_NEED_MM = crops.KC_MAX * crops.ETO_MAX_MM_PER_DAY
PLANTING_DOY_RANGE = (121, 152)  # uniform in [121, 152): May
INITIAL_LEVEL_RANGE = (0.75, 1.0)
OBSERVATION_SIZE = 5 + len(RULE_NAMES)  # level, pressure, allowed fraction, delivery, progress; the rules as u


@dataclass(frozen=True)
class WorldConfig:
    """The world's settings (docs/world.md). The last four decide whether 0.2500 can be a structural cap:
    with release_share 1 the outflow matches the inflow (pressure 1), with no rain a day's best reward is
    f − c·f^p, and a small farm area keeps the lake (and so the quota's allowance) up all season."""

    num_farms: int = knob(5, "farms per lake", low=1, study_name="farms")
    horizon: int = knob(150, "days per season", low=1)
    smoothing: float = knob(0.0, "width of the quota ramp's smoothing (0: the hard ramp)", low=0)
    release_share: float = knob(
        hydrology.RELEASE_SHARE, "an ordinary day's outflow over inflow (1: pressure saturated at 1)", low=0, high=1
    )
    rain_probability: float = knob(hydrology.RAIN_PROBABILITY, "share of days with rain", low=0, high=1)
    rain_mean_mm: float = knob(hydrology.RAIN_MEAN_MM, "mean rain of a wet day (mm)", low=0)
    farm_area_km2: float = knob(
        TOTAL_FARM_AREA_KM2,
        "irrigated area of a lake's farms, all together (km²): their demand against the lake",
        low=0,
        open_low=True,
    )

    def __post_init__(self):
        check_knobs(self)

    @property
    def peak_daily_need_m3(self) -> float:
        """All farms' largest daily crop need: the delivery observation's unit."""
        return PEAK_NEED_MM / 1000.0 * (self.farm_area_km2 * 1e6)


@dataclass(frozen=True)
class DayLog:
    """One day of every candidate lake: shape (N,) per candidate, (N, F) per farm, scalars shared."""

    requested_fraction: np.ndarray  # (N, F) action f
    delivered_m3: np.ndarray  # (N, F)
    reward: np.ndarray  # (N, F)
    quota_penalty: np.ndarray  # (N, F)
    flow_penalty: np.ndarray  # (N, F)
    allowed_fraction: np.ndarray  # (N,) a(L) at the start of the day
    pressure: np.ndarray  # (N,)
    level: np.ndarray  # (N,) end of day
    volume_start_m3: np.ndarray  # (N,)
    withdrawal_m3s: np.ndarray  # (N,)
    release_m3s: np.ndarray  # (N,)
    spill_m3s: np.ndarray  # (N,)
    inflow_m3s: float
    baseline_level: float  # end of day
    need_mm: float
    rain_mm: float
    deficit_mm: float


class Basin:
    """`population` candidate lakes with `num_farms` farms each, and a baseline lake."""

    def __init__(self, config: WorldConfig, rules: Sequence[Rules]):
        if not rules:
            raise ValueError("a basin needs at least one candidate rule set")
        self.config = config
        self.rules = tuple(rules)
        self.population = len(self.rules)
        column = lambda name: np.array([getattr(r, name) for r in self.rules], dtype=float)  # noqa: E731
        self._rule = {name: column(name) for name in RULE_NAMES}
        self._rule_per_farm = {name: value[:, None] for name, value in self._rule.items()}
        self._rule_obs = unit_rules(RULE_SPECS, rule_columns(RULE_SPECS, [r.as_dict() for r in self.rules]))
        self.farm_area_m2 = config.farm_area_km2 * 1e6 / config.num_farms
        self._peak_daily_need_m3 = config.peak_daily_need_m3
        self.failed = np.zeros(self.population, dtype=bool)
        self._rng = np.random.default_rng()
        self.day = 0

    # -- episode ---------------------------------------------------------
    def reset(self, rng: np.random.Generator | Sequence[np.random.Generator]) -> np.ndarray:
        """A new season: one generator for every lake's weather, or one per lake (the same object: one weather)."""
        shared = isinstance(rng, np.random.Generator)
        per_lake = [rng] * self.population if shared else list(rng)
        if len(per_lake) != self.population:
            raise ValueError(f"{len(per_lake)} random generators for {self.population} lakes")
        streams: dict[int, int] = {}  # a generator's id → its place among the distinct ones
        for g in per_lake:
            streams.setdefault(id(g), len(streams))
        self._shared = shared
        self._streams = list({id(g): g for g in per_lake}.values())
        self._stream_of = np.array([streams[id(g)] for g in per_lake])
        days = np.arange(self.config.horizon)
        planting, initial = [], []
        for stream in self._streams:
            planting.append(int(stream.integers(*PLANTING_DOY_RANGE)))
            initial.append(stream.uniform(*INITIAL_LEVEL_RANGE) * hydrology.CAPACITY_M3)
        self.planting_doy = planting[0] if shared else np.array(planting)[self._stream_of]
        # the season's crop need, day by day (no draw: the same numbers a day-by-day computation gives)
        self._need_mm = [
            crops.crop_need_mm(crops.day_of_year(doy, days), days).tolist() for doy in planting
        ]  # per stream
        self._planting = planting
        self.volume = np.asarray(initial)[self._stream_of]
        self.baseline_volume = initial[0] if shared else np.asarray(initial, dtype=float)
        self.pressure = np.full(self.population, self.config.release_share)
        self.delivery_prev = np.zeros(self.population)
        self.failed[:] = False
        self.day = 0
        self._allowed_now = self.allowed(self.volume / hydrology.CAPACITY_M3)
        return self.observe()

    def allowed(self, level) -> np.ndarray:
        r = self._rule
        return law.allowed_fraction(
            level, r["fixed_quota"], r["min_demand_frac"], r["max_demand_frac"], self.config.smoothing
        )

    def observe(self) -> np.ndarray:
        """(N, 11) float32: level, pressure, allowed fraction, delivery, progress (each clipped to [0, 1]), rules as u."""
        obs = np.empty((self.population, OBSERVATION_SIZE))
        obs[:, 0] = self.volume / hydrology.CAPACITY_M3
        obs[:, 1] = self.pressure
        obs[:, 2] = self._allowed_now
        obs[:, 3] = self.delivery_prev / self._peak_daily_need_m3
        obs[:, 4] = self.day / self.config.horizon
        head = obs[:, :5]
        np.minimum(np.maximum(head, 0.0, out=head), 1.0, out=head)  # np.clip, without its per-call overhead
        obs[:, 5:] = self._rule_obs
        obs[self.failed] = 0.0  # a failed lake must not feed NaN to the policy
        return obs.astype(np.float32)

    @property
    def done(self) -> bool:
        return self.day >= self.config.horizon

    def _weather(self, k: int) -> tuple[float, float, float, float]:
        """Today's (crop need, rain, deficit in mm, inflow in m³/s) of weather stream k, drawn from it in order."""
        rng = self._streams[k]
        doy = crops.day_of_year(self._planting[k], self.day)
        need_mm = self._need_mm[k][self.day]
        rain_mm = float(hydrology.draw_rain_mm(rng, None, self.config.rain_probability, self.config.rain_mean_mm))
        deficit_mm = max(0.0, need_mm - rain_mm)
        inflow = float(hydrology.inflow_m3s(doy, rng.standard_normal()))
        return need_mm, rain_mm, deficit_mm, inflow

    def step(self, fractions: np.ndarray) -> DayLog:
        """Advance one day; `fractions` (N, F) are the farms' requested fractions of the deficit."""
        f = np.asarray(fractions, dtype=float).reshape(self.population, self.config.num_farms)
        self.failed |= ~np.isfinite(f).all(axis=1)
        f = np.minimum(np.maximum(np.where(np.isnan(f), 0.0, f), 0.0), 1.0)  # NaN requests nothing; ±inf clip
        r = self._rule_per_farm
        weather = [self._weather(k) for k in range(len(self._streams))]  # per stream: need, rain, deficit, inflow
        to_m3 = self.farm_area_m2 / 1000.0
        if self._shared:
            need_mm, rain_mm, deficit_mm, inflow = weather[0]
            need_m3, rain_m3, deficit_m3 = need_mm * to_m3, rain_mm * to_m3, deficit_mm * to_m3
            per_farm = lambda x: x  # noqa: E731 - one number for every lake
        else:
            need_mm, rain_mm, deficit_mm, inflow = (np.array(column)[self._stream_of] for column in zip(*weather))
            need_m3, rain_m3, deficit_m3 = need_mm * to_m3, rain_mm * to_m3, deficit_mm * to_m3
            per_farm = lambda x: x[:, None]  # noqa: E731 - each lake's own
        need_m3, rain_m3, deficit_m3 = per_farm(need_m3), per_farm(rain_m3), per_farm(deficit_m3)

        allowed = self._allowed_now
        requested = f * deficit_m3
        allowed_m3 = allowed[:, None] * deficit_m3
        release_share = self.config.release_share
        lake = hydrology.step_lake(self.volume, inflow, np.minimum(requested, allowed_m3).sum(axis=1), release_share)
        delivered = np.minimum(requested, allowed_m3) * lake.delivered_share[:, None]
        stream_inflow = inflow if self._shared else np.array([w[3] for w in weather])
        baseline = hydrology.step_lake(self.baseline_volume, stream_inflow, 0.0, release_share)
        pressure = lake.pressure(inflow)

        quota = law.quota_penalty(requested, allowed_m3, deficit_m3, r["fine_amount"])
        flow = law.flow_penalty(f, pressure[:, None], r["risk_penalty_scale"], r["risk_penalty_power"])
        reward = law.reward(law.satisfaction(delivered, rain_m3, need_m3), quota, flow)

        self.failed |= ~(np.isfinite(reward).all(axis=1) & np.isfinite(lake.volume))
        volume_start = self.volume
        self.volume = np.where(self.failed, self.volume, lake.volume)
        self.baseline_volume = float(baseline.volume) if self._shared else baseline.volume
        self.pressure = pressure
        self.delivery_prev = delivered.sum(axis=1)
        self.day += 1
        self._allowed_now = self.allowed(self.volume / hydrology.CAPACITY_M3)  # tonight's observation, tomorrow's quota
        return DayLog(
            requested_fraction=f,
            delivered_m3=delivered,
            reward=reward,
            quota_penalty=quota,
            flow_penalty=flow,
            allowed_fraction=allowed,
            pressure=pressure,
            level=lake.level,
            volume_start_m3=volume_start,
            withdrawal_m3s=lake.withdrawal,
            release_m3s=lake.release,
            spill_m3s=lake.spill,
            inflow_m3s=inflow,
            baseline_level=float(baseline.level) if self._shared else baseline.level[self._stream_of],
            need_mm=need_mm,
            rain_mm=rain_mm,
            deficit_mm=deficit_mm,
        )


def stack_days(days: Sequence[DayLog]) -> dict[str, np.ndarray]:
    """Stack an episode's days along a leading time axis, field by field."""
    return {f.name: np.stack([np.asarray(getattr(d, f.name)) for d in days]) for f in fields(DayLog)}
