"""Custom inner loops for fault tests (a study names them as inner = "tests.inner_loops:Class")."""

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
