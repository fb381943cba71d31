"""Custom inner loops for fault tests (a study names them as inner = "tests.inner_loops:Class")."""

import os
import time
from pathlib import Path

import numpy as np

from bilevel_tune.analytic import AnalyticLoop, myopic_best_response
from bilevel_tune.evaluation import evaluate_policy


class NaNPolicyLoop(AnalyticLoop):
    """The analytic loop, except that candidate 0's farms request NaN — all candidates when the population is 1.

    The NaN goes through the real basin, which must mark that candidate's lake failed.
    """

    def evaluate(self, seeds):
        best_response = myopic_best_response(self.rules)

        def policy(obs):
            fractions = best_response(obs)
            fractions[0] = np.nan
            return fractions

        return evaluate_policy(self.config.world, self.config.weights, self.rules, seeds, policy)


class UnconfirmedStopLoop(AnalyticLoop):
    """Reports, like a PolicyLoop whose RLlib internals moved, that it cannot confirm the learner stopped."""

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
