"""Custom inner loops for fault tests (a study names them as inner = "tests.inner_loops:Class")."""

import os
import time
from pathlib import Path

import numpy as np

from bilevel_tune.inner.analytic import AnalyticLoop
from bilevel_tune.inner.evaluation import evaluate
from bilevel_tune.worlds.contract import Assessment
from bilevel_tune.worlds.fresh_water.rules import rule_spec


class NaNPolicyLoop(AnalyticLoop):
    """The analytic loop, except that candidate 0's farms request NaN — all candidates when the population is 1.

    The NaN goes through the real basin, which must mark that candidate's lake failed.
    """

    def evaluate(self, seeds):
        world = self.config.build_world(self.rules)

        def act(obs):
            actions = world.myopic_actions(obs).copy()
            actions[0] = np.nan
            return actions

        return evaluate(world, seeds, act, self.config.objective_settings)


class UnconfirmedStopLoop(AnalyticLoop):
    """Reports, like a PopulationPolicyLoop whose RLlib internals moved, that it cannot confirm the learner stopped."""

    def reset(self, rules, seed, candidates):
        super().reset(rules, seed, candidates)
        return False


class HeldLoop(AnalyticLoop):
    """The analytic loop, held after its first generation for as long as the file BILEVEL_TEST_HOLD names exists.

    A test can then look at a study that is certainly still running, and let it go.
    """

    HOLD_ENV = "BILEVEL_TEST_HOLD"

    def __init__(self, config):
        super().__init__(config)
        self.generations = 0

    def evaluate(self, seeds):
        self.generations += 1
        hold = os.environ.get(self.HOLD_ENV)
        while self.generations > 1 and hold and Path(hold).exists():
            time.sleep(0.05)
        return super().evaluate(seeds)


class LandscapeLoop(AnalyticLoop):
    """A known landscape: the objective is a closed-form function of u, min_demand_frac's unit value.

    No world, no noise: every seed sees the same landscape, so a scan's argmax and a trial's
    regret are exact. `bound(u)` is the objective's upper bound (the rules' cap where it equals it).
    """

    def value(self, u: float) -> float:
        raise NotImplementedError

    def bound(self, u: float) -> float:
        return 0.4

    def evaluate(self, seeds):
        out = []
        for rules in self.rules:
            u = rule_spec("min_demand_frac").to_unit(rules["min_demand_frac"])
            value, bound = self.value(u), self.bound(u)
            out.append(
                Assessment(
                    objective=value, terms={"mean_reward": value, "sustainability": 1.0},
                    diagnostics={"reward_upper_bound": bound, "requested_fraction": 0.5, "delivered_m3": 0.0,
                                 "allowed_fraction": 0.5, "pressure": 0.6, "flow_penalty": 0.0, "quota_penalty": 0.0},
                    upper_bound=bound, failed=False,
                )
            )  # fmt: skip
        return out


class PeakLoop(LandscapeLoop):
    """One peak, 0.3 at u = 0.5: a grid point of any odd scan, and where every ES run starts."""

    def value(self, u):
        return 0.3 - 0.2 * (u - 0.5) ** 2


class CappedLoop(LandscapeLoop):
    """0.25 everywhere, and the rules allow no more: a structural ceiling."""

    def value(self, u):
        return 0.25

    def bound(self, u):
        return 0.25


class ShortLoop(LandscapeLoop):
    """A plateau at 0.25 around u = 0.5, a valley, and a higher peak (0.35) at the end of the range: a short search."""

    def value(self, u):
        if abs(u - 0.5) <= 0.2:
            return 0.25
        return 0.35 if u >= 0.95 else 0.1


class LakesLoop(AnalyticLoop):
    """The analytic loop training any block of lakes as one (`reset_lakes`): what a lake pool packs, without RLlib."""

    def reset_lakes(self, lakes) -> bool:
        self.lakes = list(lakes)
        self.rules = [dict(lake.rules) for lake in self.lakes]
        return True

    def evaluate_lakes(self, seeds) -> list[Assessment]:
        from bilevel_tune.worlds.lakes import LakeWorlds, evaluate_lakes, groups

        runs = groups([tuple(s) for s in seeds])
        worlds = LakeWorlds(self.config.world_class, self.config.world_settings, self.rules, [n for _, n in runs])
        return evaluate_lakes(worlds, [seeds[a] for a, _ in runs], worlds.myopic_actions, self.config.objective_settings)
