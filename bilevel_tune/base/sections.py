"""The study file's sections, each a frozen dataclass whose fields declare its settings (`knobs.knob`).

The configs the code runs on are built from these, never re-declared:
`inner.InnerLoopConfig` is the world (its config class, fresh water's
`worlds.fresh_water.basin.WorldConfig`, declares [world]), [network], [appo] and [objective]; `es.ESConfig` is
[es] plus the population; `Budget` is [budget] plus the generations.
[rules] is declared by the world's rule specs (`worlds.fresh_water.rules.RULE_SPECS`). A `definition.Study`
holds one instance of each, as run.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from bilevel_tune.base.knobs import StudyError, check_knobs, knob

SHAPINGS = ("zscore", "centered_rank")  # the ES's fitness shapings (es.shape)
DECIDE_TESTS = ("paired", "adastop")  # [decide] test: verdicts.decide's tests
DECIDE_SCORES = ("best-so-far", "search mean")  # [decide] score: which final rules' re-evaluation the rows read
OPTIMIZER_NAMES = ("es", "cma", "bo", "random", "optuna")  # [outer] optimizer: the built-in outer optimisers
BO_ACQUISITIONS = ("qLogNEI", "qLogEI", "qUCB")  # [bo] acquisition: BoTorch's batch acquisition functions, by name
PACK_MODES = ("auto", "off")  # [runtime] pack: small populations' trials share a block of lakes where it is cheaper, or never


@dataclass(frozen=True, kw_only=True)  # keywords only: ESConfig(16) must not silently set σ
class _Checked:
    def __post_init__(self):
        check_knobs(self)


@dataclass(frozen=True, kw_only=True)
class NetworkSettings(_Checked):
    hidden: tuple[int, ...] = knob((256, 256), "hidden layer sizes of the policy and value networks", appo=True)


@dataclass(frozen=True, kw_only=True)
class AppoSettings(_Checked):
    """RLlib APPO's own settings (appo.rllib_config maps them to RLlib's names)."""

    lr: float = knob(1e-3, "Adam's learning rate", low=0, open_low=True, high=1, appo=True)
    discount: float = knob(0.99, "the farms' discount γ", low=0, high=1, appo=True)
    entropy_coeff: float = knob(0.001, "weight of the entropy bonus", low=0, high=1, appo=True)
    grad_clip: float = knob(40.0, "global gradient-norm clip, per candidate", low=0, open_low=True, appo=True)
    vtrace_clip_rho_threshold: float = knob(
        1.0, "V-trace's clip of the value targets' IS ratios", low=0, open_low=True, appo=True
    )
    vtrace_clip_pg_rho_threshold: float = knob(
        1.0, "V-trace's clip of the policy gradient's IS ratios", low=0, open_low=True, appo=True
    )
    fragments_per_batch: int = knob(
        1, "seasons of the whole block in one training batch (a train step's sample)", low=1, appo=True
    )


@dataclass(frozen=True, kw_only=True)
class ESSettings(_Checked):
    sigma: float = knob(0.15, "initial ES step size σ, logit units", low=0, open_low=True, inner=False)
    lr: float = knob(0.10, "ES learning rate of the mean", low=0, open_low=True, inner=False)
    sigma_lr: float = knob(0.02, "how fast σ adapts (γ = sigma_decay ** sigma_lr)", low=0, open_low=True, inner=False)
    sigma_decay: float = knob(0.99, "σ's factor base", low=0, open_low=True, high=1, inner=False)
    sigma_min: float = knob(0.01, "σ's lower bound", low=0, open_low=True, inner=False)
    sigma_max: float = knob(0.25, "σ's upper bound", low=0, open_low=True, inner=False)
    shaping: str = knob("zscore", "fitness shaping of population ≥ 2", choices=SHAPINGS, inner=False)
    grad_clip: float = knob(5.0, "norm clip of the ES gradient", low=0, open_low=True, inner=False)


@dataclass(frozen=True, kw_only=True)
class OuterSettings(_Checked):
    """[outer]: which optimiser searches the rules (core.outer); each has its own section of settings."""

    optimizer: str = knob(
        "es", "the outer optimiser: es (the Evolution Strategy, [es]), cma (CMA-ES, [cma]), bo (Bayesian "
        "optimisation, [bo]), random (uniform over the box), optuna (an Optuna sampler, [optuna]), or a class of yours "
        "(core.outer.OuterOptimizer)",
        choices=OPTIMIZER_NAMES, plugin=True, inner=False,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class CMASettings(_Checked):
    """[cma]: CMA-ES (Hansen's `cma`) over the unit box of the searched rules' u."""

    sigma0: float = knob(0.25, "CMA-ES's initial step size, in units of the unit box", low=0, open_low=True, high=1,
                         inner=False)  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class BOSettings(_Checked):
    """[bo]: Bayesian optimisation (BoTorch: a GP with learned noise, qLogNEI asking a population at a time)."""

    initial: int = knob(8, "evaluations drawn uniformly over the box before the GP is first fitted", low=1,
                        inner=False)  # fmt: skip
    raw_samples: int = knob(128, "random points that seed the acquisition's optimisation", low=1, inner=False)
    restarts: int = knob(2, "starts of the acquisition's optimisation (L-BFGS-B) from the best raw samples", low=1,
                         inner=False)  # fmt: skip
    mc_samples: int = knob(128, "quasi-Monte-Carlo samples of the posterior in the acquisition", low=1, inner=False)
    acquisition: str = knob(
        "qLogNEI", "the batch acquisition, one BoTorch class each: qLogNEI (qLogNoisyExpectedImprovement), qLogEI "
        "(qLogExpectedImprovement over the best evaluation), qUCB (qUpperConfidenceBound, with beta)",
        choices=BO_ACQUISITIONS, inner=False,
    )  # fmt: skip
    beta: float = knob(0.2, "qUCB's exploration weight β (qUCB only)", low=0, inner=False)
    noise: float | None = knob(
        None, "the objective's noise variance, fixed (its squared units); none: learned by the GP's likelihood",
        low=0, open_low=True, unset="learned", inner=False,
    )  # fmt: skip

    def __post_init__(self):
        super().__post_init__()
        if self.beta != BOSettings.beta and self.acquisition != "qUCB":
            raise StudyError(
                f"[bo] beta={self.beta:g} is qUCB's exploration weight, and acquisition={self.acquisition!r} takes "
                "none: set bo.acquisition=qUCB, or drop beta"
            )


OPTUNA_SAMPLERS = ("tpe", "gp", "cmaes", "qmc", "random")  # [optuna] sampler: Optuna's own, by name


@dataclass(frozen=True, kw_only=True)
class OptunaSettings(_Checked):
    """[optuna]: an Optuna sampler over the unit box of the searched rules' u (pip install 'bilevel_tune[optuna]')."""

    sampler: str = knob(
        "tpe", "Optuna's sampler: tpe (TPESampler), gp (GPSampler), cmaes (CmaEsSampler), qmc (QMCSampler), random "
        "(RandomSampler)", choices=OPTUNA_SAMPLERS, inner=False,
    )  # fmt: skip
    options: tuple[tuple[str, Any], ...] = knob(
        (), "the sampler's own keyword settings, e.g. {n_startup_trials = 5, multivariate = true} (TPESampler's); "
        "its seed is the trial's", options=True, inner=False,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class BudgetSettings(_Checked):
    """[budget]'s settings; its generations (one count, or one per population) are `definition.Budget`'s."""

    inner_iters: int = knob(50, "K: APPO train() calls per generation", low=1)
    eval_episodes: int = knob(1, "evaluation seasons per candidate per generation", low=1)
    final_eval_seeds: int = knob(3, "fresh seeds of the final re-evaluation", low=0)
    evaluations: int | None = knob(
        None, "inner-loop evaluations per run (farm trainings): every optimiser gets the same; sets each cell's "
        "generations to evaluations / population", low=1, integer=True, inner=False,
        unset="budget.generations sets the runs' length",
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class SummarySettings(_Checked):
    ceiling: float | None = knob(
        None, "the objective value the ceiling answer looks for", unset="the world's: fresh water 0.25, others none",
        inner=False,
    )  # fmt: skip
    tol: float = knob(1e-4, "how close to the ceiling counts as at it", low=0, inner=False)
    eps: float | None = knob(
        None, "how close to the rules scan's best an optimiser's incumbent must come (evaluations to ε)", low=0,
        open_low=True, unset="the rules scan's noise at its best, else decide.margin, else 0.01", inner=False,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class DecideSettings(_Checked):
    """[decide]: how a study decides its comparisons — a group-sequential test with the family-wise error controlled
    over all of them (docs/verdicts.md) — and how many seeds it may add to do so."""

    test: str = knob(
        "paired", "paired: a group-sequential paired t on the within-seed contrasts (main effects, interactions, "
        "simple effects); adastop: AdaStop's unpaired permutation test on the simple effects", choices=DECIDE_TESTS,
        inner=False,
    )  # fmt: skip
    alpha: float = knob(0.05, "family-wise error rate over the study's comparisons", low=0, open_low=True, high=0.5,
                        inner=False)  # fmt: skip
    seeds_per_stage: int = knob(
        2, "seeds per cell each stage adds (the first stage is the grid's seeds, as many)", low=1, inner=False
    )
    max_seeds: int = knob(6, "seeds per cell at most (a multiple of seeds_per_stage)", low=1, inner=False)
    beta: float = knob(0.0, "AdaStop's power spent on deciding 'no difference' early (0: never; adastop only)", low=0, high=0.5,
                       inner=False)  # fmt: skip
    compare: tuple[str, ...] = knob(
        (), "the factors compared (population, mechanism or a grid axis's key); empty: every factor", words=True,
        inner=False,
    )  # fmt: skip

    score: str = knob(
        "best-so-far", "what a trial's score is: its best-so-far rules retrained on the final seeds (the mean), or its "
        "final search mean's rules likewise (often steadier: chosen from a pilot, docs/verdicts.md)",
        choices=DECIDE_SCORES, inner=False,
    )  # fmt: skip
    margin: float | None = knob(
        None, "the smallest difference that matters, in the objective's units: a comparison whose repeated interval "
        "lies inside ±margin is decided equivalent (paired test only)", low=0, open_low=True,
        unset="no equivalence answers: better, or undecided", inner=False,
    )  # fmt: skip
    equal_budget: tuple[str, ...] = knob(
        (), "factors whose levels run different evaluations (population, through [budget] generations) also compared "
        "at equal evaluations: each run of a larger level re-scores its incumbent at the smaller level's evaluations in "
        "its final re-evaluation, and those rows join the family (paired test only)", words=True, inner=False,
    )  # fmt: skip
    margin_from: int = knob(
        1, "the first look the margin decides at: a margin declared on a resumed run (--declare-margin) applies from "
        "its next look", low=1, inner=False,
    )  # fmt: skip

    def __post_init__(self):
        super().__post_init__()
        if self.margin is not None and self.test != "paired":
            raise StudyError(
                f"[decide] margin={self.margin:g} needs the paired test's repeated intervals; test={self.test!r} has "
                "none: set decide.test=paired, or drop the margin (decide.margin=none)"
            )
        if self.max_seeds % self.seeds_per_stage:
            raise StudyError(
                f"[decide] max_seeds={self.max_seeds} must be a multiple of seeds_per_stage={self.seeds_per_stage}"
            )
        if self.equal_budget and self.test != "paired":
            raise StudyError(
                f"[decide] equal_budget={list(self.equal_budget)} adds rows to the paired test's family; "
                f"test={self.test!r} has none: set decide.test=paired, or drop equal_budget"
            )
        if self.beta and self.test != "adastop":
            raise StudyError(
                f"[decide] beta={self.beta:g} is AdaStop's early 'no difference', and test={self.test!r} never stops "
                "early for it: set decide.test=adastop, or drop beta"
            )

    @property
    def stages(self) -> int:
        """K: the looks at the data, one per stage."""
        return self.max_seeds // self.seeds_per_stage


@dataclass(frozen=True, kw_only=True)
class FinalSettings(_Checked):
    """[final]: what scores each run's final rules besides its own loop's re-evaluation (docs/verdicts.md)."""

    learners: tuple[str, ...] = knob(
        (), "held-out learners that score each run's final rules and the status quo on its final seeds: analytic, "
        "ppo, frozen, a loop with other settings (appo(appo.lr=3e-4)) or module:Class", words=True, inner=False,
    )  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class RuntimeSettings(_Checked):
    """[runtime]: how the trials are run, never what they compute (each lake's numbers are its own either way)."""

    pack: str = knob(
        "auto", "auto: a stage's trials of one small population share one block of lakes a generation (one CPU, "
        "their searches in step: docs/inner-loop.md) where their loop trains lakes as one; off: every trial alone",
        choices=PACK_MODES, inner=False,
    )  # fmt: skip


@dataclass(frozen=True)
class Budget(BudgetSettings):
    """How much of the study a run does: [budget]'s settings, and `generations`: one count, or (population, count) pairs."""

    generations: int | tuple[tuple[int, int], ...] = dataclasses.field(kw_only=True)

    def generations_for(self, population: int) -> int:
        if self.evaluations is not None:
            if self.evaluations % population:
                raise StudyError(
                    f"budget.evaluations={self.evaluations} must be a multiple of population {population}: a "
                    "generation evaluates the whole population"
                )
            return self.evaluations // population
        if isinstance(self.generations, int):
            return self.generations
        table = dict(self.generations)
        if population not in table:
            raise StudyError(
                f"budget.generations has no entry for population {population}; add one or give one integer for all cells"
            )
        return table[population]


# each built-in optimiser's own section ([es], [cma], [bo], [optuna]); random search has none
OPTIMIZER_SECTIONS = {"es": ESSettings, "cma": CMASettings, "bo": BOSettings, "optuna": OptunaSettings}
