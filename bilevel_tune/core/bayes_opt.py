"""Bayesian optimisation (BoTorch) over the unit box of the searched rules' u (docs/es.md).

Each generation it fits a GP with learned noise (`SingleTaskGP`: a Matérn-5/2 kernel, a Gaussian likelihood whose
noise is a hyperparameter, the objectives standardised) to every evaluation so far and asks `population` points at
once by maximising the noisy batch acquisition qLogNEI (Ament et al. 2023) — so the inner loop still evaluates a
whole population in one pass. `[bo] acquisition` chooses another BoTorch class (qLogEI, qUCB with `[bo] beta`) and
`[bo] noise` fixes the noise variance instead of learning it; their defaults are the above, bit for bit. The first `[bo] initial` evaluations are drawn uniformly. Failed candidates enter the
GP at the worst value seen (ranked worst). The incumbent is the evaluated point of highest posterior mean: the rules
BO would return, its noise averaged out.

An exact GP costs O(n³) in its n evaluations, and the acquisition grows with them: `MAX_EVALUATIONS` bounds a run
(a longer one is refused in one line); `benchmarks/optimizers.py` measures the share of a run BO's own seconds take.
Its torch draws are seeded by (seed, generation) inside `torch.random.fork_rng`, and the candidates it asks are kept
in the state, so a resumed run asks what the uninterrupted one would. Imports torch and BoTorch only when asked.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

from bilevel_tune.base import seeds
from bilevel_tune.core.outer import PendingSearch, SearchState, checked, fill_failed, rows, told, uniform

MAX_EVALUATIONS = 600  # the exact GP's n: its fit and qLogNEI stay seconds per generation up to here


class BayesianOptimisation(PendingSearch):
    name, section, max_evaluations = "bo", "bo", MAX_EVALUATIONS
    max_evaluations_why = "fits an exact GP to every evaluation"

    def init(self, settings, population: int, dim: int, seed: int) -> SearchState:
        first = uniform(seed, 0, (population, dim))
        return SearchState(self.name, population, dim, seed, settings=dataclasses.asdict(settings), pending=rows(first))

    def tell(self, state: SearchState, candidates, objectives) -> tuple[SearchState, dict[str, Any]]:
        candidates, f = checked(state, candidates, objectives)
        known = dataclasses.replace(state, history=state.history + ((rows(candidates), tuple(f.tolist())),))
        x, y = known.evaluations()
        generation = state.generation + 1
        if len(y) < state.settings["initial"] or not np.isfinite(y).any():
            following, incumbent = uniform(state.seed, generation, (state.population, state.dim)), None
        else:
            following, incumbent = _acquire(x, fill_failed(y), state, generation)
        return told(state, candidates, f, following, incumbent=incumbent)


def _acquire(x: np.ndarray, y: np.ndarray, state: SearchState, generation: int) -> tuple[np.ndarray, np.ndarray]:
    """The GP fitted to (x, y); the next batch by qLogNEI, and the evaluated point of highest posterior mean."""
    import torch

    seed = seeds.optimizer_seed(state.seed, generation)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # n ≤ 600 points: one thread is fastest, and the inner loop's shards have the cores
    try:
        return _fit_and_ask(x, y, state, seed, torch)
    finally:
        torch.set_num_threads(threads)


def _fit_and_ask(x, y, state, seed, torch):
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import SingleTaskGP
    from botorch.models.transforms import Standardize
    from botorch.optim import optimize_acqf
    from botorch.sampling import SobolQMCNormalSampler
    from gpytorch.mlls import ExactMarginalLogLikelihood

    settings = state.settings
    with torch.random.fork_rng(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BoTorch's notes on input scaling and fit retries: the box is the unit one
        torch.manual_seed(seed)
        train_x = torch.tensor(x, dtype=torch.double)
        train_y = torch.tensor(y, dtype=torch.double).unsqueeze(-1)
        noise = settings.get("noise")  # None: learned by the likelihood (a record before the setting: learned too)
        fixed = {} if noise is None else {"train_Yvar": torch.full_like(train_y, float(noise))}
        model = SingleTaskGP(train_x, train_y, **fixed, outcome_transform=Standardize(m=1))
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
        sampler = SobolQMCNormalSampler(torch.Size([settings["mc_samples"]]), seed=seed)
        acquisition = _acquisition(settings, model, train_x, train_y, sampler)
        bounds = torch.stack([torch.zeros(state.dim), torch.ones(state.dim)]).double()
        batch, _ = optimize_acqf(
            acquisition, bounds=bounds, q=state.population, num_restarts=settings["restarts"],
            raw_samples=settings["raw_samples"], options={"seed": seed},
        )  # fmt: skip
        with torch.no_grad():
            posterior_mean = model.posterior(train_x).mean.squeeze(-1).numpy()
    return np.clip(batch.detach().numpy(), 0.0, 1.0), x[int(np.argmax(posterior_mean))]


def _acquisition(settings: dict, model, train_x, train_y, sampler):
    """`[bo] acquisition`, one BoTorch class each: qLogNEI (the default, as every run before the setting), qLogEI
    over the best evaluation so far, qUCB with `[bo] beta`."""
    name = settings.get("acquisition", "qLogNEI")
    if name == "qLogEI":
        from botorch.acquisition.logei import qLogExpectedImprovement

        return qLogExpectedImprovement(model, best_f=train_y.max(), sampler=sampler)
    if name == "qUCB":
        from botorch.acquisition.monte_carlo import qUpperConfidenceBound

        return qUpperConfidenceBound(model, beta=float(settings["beta"]), sampler=sampler)
    from botorch.acquisition.logei import qLogNoisyExpectedImprovement

    return qLogNoisyExpectedImprovement(model, X_baseline=train_x, sampler=sampler, prune_baseline=True)
