"""One trial's plan: everything the trial runs, compiled once by the driver from the study and the trial's cell.

The trial reads nothing else — no study to rebuild, no grid to search for its cell, no overrides to re-apply. Tune's
`param_space` carries each plan as plain JSON (`{metrics.TRIAL: plan.to_dict()}`), so a trial folder's params.json shows
what the trial ran, and W&B's run config the same:

    {"study": "weekend", "name": "weekend_pop16_2d_seed42", "stage": 1,
     "cell": {"population": 16, "optimize_params": ["min_demand_frac", "fixed_quota"], "seed": 42},
     "generations": 30, "evaluations": 480,
     "seeds": {"run": 42, "evaluation": [...], "final": [...]},
     "optimizer": {"name": "es", "settings": {"sigma": 0.15, ...}},
     "inner": {"loop": "appo", "inner_iters": 50, "config": {"lr": 0.001, ..., "world_kind": "fresh-water", ...}},
     "rules": {"fixed": {...}, "search": {"fixed_quota": [0.6, 0.95], ...}},
     "scan_points": null, "equal_evaluations": [], "settings": {"world.farms": 5, ...}}

A trial's generation seeds are derived from its run seed as they always were (`base.seeds`): the plan lists the
run seed, and the evaluation and final seeds that derivation gives.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping

from bilevel_tune.base.sections import OPTIMIZER_SECTIONS
from bilevel_tune.inner.contract import InnerLoopConfig, Seeds
from bilevel_tune.study_data.design import compile_design, equal_evaluations
from bilevel_tune.study_data.run_folder import SCAN, Cell, json_safe, trial_name
from bilevel_tune.study_data.study_overrides import for_cell
from bilevel_tune.study_data.study_record import frozen
from bilevel_tune.worlds.contract import RuleSpec


@dataclass(frozen=True)
class TrialPlan:
    """What one trial runs (see the module's docstring for its JSON)."""

    study: str
    name: str  # the trial's name: its folder's, less Tune's id
    stage: int
    cell: Cell
    seeds: Seeds
    optimizer: str
    optimizer_settings: Any  # its section's settings (ESSettings, …); None for an optimiser without a section
    loop: str  # the inner loop's spec: appo, analytic, module:Class
    inner_iters: int
    inner_config: InnerLoopConfig
    fixed_rules: dict[str, float]
    search: dict[str, tuple[float, float]]
    scan_points: int | None
    equal_evaluations: tuple[int, ...]  # the smaller budgets it is also scored at ([decide] equal_budget)
    settings: dict[str, Any]  # every setting as this trial runs it: its record's first line

    @classmethod
    def of(cls, study, cell: Cell) -> "TrialPlan":
        """The plan of this cell of a `definition.Study` (its further axes' values set)."""
        from bilevel_tune.core import outer

        trial = for_cell(study, cell)
        optimizer, settings = outer.chosen(trial)
        return cls(
            study=study.name,
            name=trial_name(study, cell),
            stage=_stage(study, cell),
            cell=cell,
            seeds=Seeds(cell.seed, trial.budget.eval_episodes, trial.budget.final_eval_seeds),
            optimizer=optimizer.name,
            optimizer_settings=settings,
            loop=trial.inner,
            inner_iters=trial.budget.inner_iters,
            inner_config=InnerLoopConfig.from_study(trial),
            fixed_rules=dict(trial.rules),
            search={name: tuple(span) for name, span in trial.search},
            scan_points=trial.scan if cell.scan else None,
            equal_evaluations=() if cell.scan else equal_evaluations(trial, cell.population),
            settings=json_safe(trial.settings),
        )

    # -- what the trial reads --------------------------------------------------------------------------
    @property
    def rule_specs(self) -> tuple[RuleSpec, ...]:
        """Its world's rules, each mapping u in [0, 1] onto the range this trial searches it over."""
        return tuple(
            spec if (spec.low, spec.high) == self.search.get(spec.name, (spec.low, spec.high)) else spec.with_range(
                *self.search[spec.name])
            for spec in self.inner_config.world_class.rule_specs
        )  # fmt: skip

    @property
    def rule_specs_by_name(self) -> dict[str, RuleSpec]:
        return {spec.name: spec for spec in self.rule_specs}

    # -- as JSON: Tune's config, params.json --------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        settings = self.optimizer_settings
        return json_safe(
            {
                "study": self.study,
                "name": self.name,
                "stage": self.stage,
                "cell": self.cell.as_config(),
                "generations": self.cell.generations,
                "evaluations": None if self.cell.scan else self.cell.generations * self.cell.population,
                "seeds": {"run": self.seeds.seed, "evaluation": self.seeds.evaluation, "final": self.seeds.final},
                "optimizer": {
                    "name": self.optimizer,
                    "settings": None if settings is None else dataclasses.asdict(settings),
                },
                "inner": {  # its config's world sections as dicts, as `InnerLoopConfig.from_record` reads them
                    "loop": self.loop, "inner_iters": self.inner_iters, "config": dataclasses.asdict(self.inner_config),
                },
                "rules": {"fixed": self.fixed_rules, "search": self.search},
                "scan_points": self.scan_points,
                "equal_evaluations": self.equal_evaluations,
                "settings": self.settings,
            }
        )

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrialPlan":
        key = Cell.key_of(data["cell"])
        cell = Cell(
            population=int(data["cell"]["population"]), optimize_params=key[1], seed=key[2],
            generations=int(data["generations"]), scan=key[0] == SCAN, extra=key[3],
        )  # fmt: skip
        seeds = data["seeds"]
        optimizer = data["optimizer"]
        section = OPTIMIZER_SECTIONS.get(optimizer["name"])
        settings = optimizer["settings"]
        return cls(
            study=data["study"],
            name=data["name"],
            stage=int(data["stage"]),
            cell=cell,
            seeds=Seeds.given(int(seeds["run"]), seeds["evaluation"], seeds["final"]),
            optimizer=optimizer["name"],
            optimizer_settings=None if settings is None else section(**{k: frozen(v) for k, v in settings.items()}),
            loop=data["inner"]["loop"],
            inner_iters=int(data["inner"]["inner_iters"]),
            inner_config=InnerLoopConfig.from_record(data["inner"]["config"]),
            fixed_rules=dict(data["rules"]["fixed"]),
            search={name: tuple(span) for name, span in data["rules"]["search"].items()},
            scan_points=data["scan_points"],
            equal_evaluations=tuple(data["equal_evaluations"]),
            settings=dict(data["settings"]),
        )


def plans_of(study) -> dict[tuple, dict[str, Any]]:
    """Every trial's plan as JSON, by cell key (the grid, its stages, its scans): compiled once a session."""
    return {cell.key: TrialPlan.of(study, cell).to_dict() for cell in compile_design(study).trial_cells}


def _stage(study, cell: Cell) -> int:
    """The stage that added this cell's seed: 1 for the grid's own seeds (and every scan)."""
    if cell.scan or cell.seed in study.seeds:
        return 1
    return next((k + 2 for k, stage in enumerate(study.stages) if cell.seed in stage.seeds), 1)
