"""One Tune trial = one run of the outer optimiser over the mechanism's searched rules, or one scan of them
(docs/study.md), run from its plan alone (`study_data.trial_plan`, Tune's config: what params.json shows).

A thin adapter: restore the optimiser's state (the ES's, CMA-ES's, BO's, random search's, Optuna's: `core.outer`)
from `tune.get_checkpoint()`, then per generation ask → inner loop (all its shards: reset, K × train, evaluate) →
tell → append to `generations.jsonl` → `tune.report(reported, checkpoint=the state)`; after the last generation,
the final re-evaluation (`final/…`).
A scan trial (bilevel_tune.core.scan) runs its grid as the candidates of one
pass per seed set instead, checkpointing the next pass.

Resources are declared here: an empty head bundle (this function takes no
CPU) and one CPU bundle per inner-loop shard (`trial_resources`). The trial
reads its bundles back from Tune (`granted_shards`), so a trial whose plan
changed on resume simply runs with the shards it was given.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
from ray import tune

from bilevel_tune.core import metrics, outer, scan
from bilevel_tune.inner import GenerationResult, ShardedInnerLoop
from bilevel_tune.inner.contract import Seeds  # noqa: F401 - the trial's seeds, also read through this module
from bilevel_tune.inner.lake_pool import PooledInnerLoop
from bilevel_tune.runtime import ray_compat
from bilevel_tune.study_data import incumbents
from bilevel_tune.study_data.definition import Study
from bilevel_tune.study_data.incumbents import generation_rows
from bilevel_tune.study_data.run_folder import (
    GENERATIONS_FILE,
    KIND_FINAL,
    KIND_GENERATION,
    Cell,
    num,
    read_records,
    trial_folder_name,
)
from bilevel_tune.study_data.run_store import append_record
from bilevel_tune.study_data.trial_plan import TrialPlan
from bilevel_tune.tune_edge.restoring import restorable
from bilevel_tune.worlds.contract import searched_rules
from bilevel_tune.worlds.lakes import seed_lakes

logger = logging.getLogger(__name__)
STATE_FILE = "outer_state.json"  # what a checkpoint holds: the outer optimiser's state, whichever optimiser
LEGACY_STATE_FILES = ("es_state.json",)  # its name before CMA-ES and BO: such checkpoints still resume
MAX_ALL_FAILED_IN_A_ROW = 3


def trial_resources(shards: int, pack_share: float | None = None) -> tune.PlacementGroupFactory:
    """The empty head bundle for the trial function, then one CPU per inner-loop shard; a packed trial's one
    bundle, its share of its pool's CPU (`inner.lake_pool`).

    Nested actors without a reservation in their trial's group would wait forever.
    """
    if pack_share is not None:
        return tune.PlacementGroupFactory([{"CPU": pack_share}])
    return tune.PlacementGroupFactory([{}] + [{"CPU": 1}] * shards)


def stop_requested() -> bool:
    """Has Tune asked this trial to stop (Ctrl-C, the end of the study)?

    Tune only tells a function trainable at its next report; a generation can
    take minutes, so the inner loop asks while it waits (through Ray's private
    session: `ray_compat`).
    """
    return ray_compat.trial_stop_requested()


def granted_shards(population: int) -> int:
    """The shards this trial's placement group holds CPUs for (never more than its candidates)."""
    bundles = tune.get_context().get_trial_resources().bundles
    return max(1, min(population, sum(1 for b in bundles if b.get("CPU", 0) >= 1)))


def candidate_rules(plan: TrialPlan | Study, params: Sequence[str], candidates) -> list[dict[str, float]]:
    """Every rule of each candidate, physical: its searched values from u, the rest fixed by the trial's plan (or a
    study's: both hold `rule_specs` and `fixed_rules`)."""
    specs = plan.rule_specs
    return [searched_rules(specs, params, u, plan.fixed_rules) for u in np.atleast_2d(candidates)]


def searched_values(plan: TrialPlan | Study, params: Sequence[str], u) -> dict[str, float]:
    """The searched rules' physical values at u."""
    rules = searched_rules(plan.rule_specs, params, u, plan.fixed_rules)
    return {name: rules[name] for name in params}


def generation_metrics(
    plan: TrialPlan, cell: Cell, es_metrics, candidates, result: GenerationResult, sec: float, sec_optimizer: float
):
    """The flat, scalar metrics Tune reports (REPORT_FIRST first: Tune's live table shows four)."""
    objectives = result.objectives
    best = result.outcomes[int(np.nanargmax(objectives)) if np.isfinite(objectives).any() else 0]
    census = result.census.as_metrics()
    headline = {
        metrics.OBJECTIVE: es_metrics[metrics.GEN_BEST_OBJECTIVE],
        metrics.BEST_OBJECTIVE: es_metrics[metrics.BEST_OBJECTIVE],
        metrics.SEC_PER_GEN: sec,
        metrics.THREADS_OS: census.pop(metrics.THREADS_OS),
    }
    out = {
        **{key: headline[key] for key in metrics.REPORT_FIRST},
        metrics.GENERATION: es_metrics[metrics.GENERATION],
        metrics.SIGMA: es_metrics[metrics.SIGMA],
        metrics.OBJECTIVE_MEAN: es_metrics[metrics.OBJECTIVE_MEAN],
        metrics.OBJECTIVE_STD: es_metrics[metrics.OBJECTIVE_STD],
        metrics.BEST_GENERATION: es_metrics[metrics.BEST_GENERATION],
        metrics.FAILED: es_metrics[metrics.FAILED],
        metrics.UPPER_BOUND: float("nan") if best.upper_bound is None else best.upper_bound,  # None: no bound known
        metrics.SHARDS: len(result.shards),
        **census,
        **result.timing,
        metrics.SEC_OPTIMIZER: sec_optimizer,
    }
    params = cell.optimize_params
    for rule, value in searched_values(plan, params, es_metrics[metrics.MEAN]).items():
        out[metrics.MEAN_RULE + rule] = value
    if es_metrics[metrics.BEST_CANDIDATE] is not None:
        for rule, value in searched_values(plan, params, es_metrics[metrics.BEST_CANDIDATE]).items():
            out[metrics.BEST_RULE + rule] = value
    for key, value in best.shown().items():
        out[metrics.BEST_DIAG + key] = value
    for k, (u, outcome) in enumerate(zip(candidates, result.outcomes)):
        out[f"{metrics.CANDIDATE}{k}/{metrics.OBJECTIVE}"] = outcome.objective
        for rule, value in searched_values(plan, params, u).items():
            out[f"{metrics.CANDIDATE}{k}/{rule}"] = value
    return out


def report(reported: dict[str, Any], saved: dict[str, Any]) -> None:
    """tune.report with what the trial needs to continue (the optimiser's state under `state_key`, or a scan's next
    pass) as checkpoint; Tune copies it first."""
    with tempfile.TemporaryDirectory(prefix="trial-ckpt-") as directory:
        Path(directory, STATE_FILE).write_text(json.dumps(saved))
        tune.report(reported, checkpoint=tune.Checkpoint.from_directory(directory))


def checkpointed() -> dict:
    """What the trial's last checkpoint holds; {} on a fresh start."""
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return {}
    with checkpoint.as_directory() as directory:
        return read_state(Path(directory))


def read_state(directory: Path) -> dict:
    """A checkpoint folder's state: its STATE_FILE, or the file an older release named it."""
    found = next(p for name in (STATE_FILE, *LEGACY_STATE_FILES) if (p := directory / name).is_file())
    return json.loads(found.read_text())


def state_key(optimizer: outer.OuterOptimizer) -> str:
    """Where a checkpoint keeps the optimiser's state: `es_state` (as every run before other optimisers),
    `cma_state`, …"""
    return f"{optimizer.name}_state"


def restore(plan: TrialPlan) -> tuple[outer.OuterOptimizer, Any, dict]:
    """The trial's optimiser, and its state: from the last checkpoint, else a fresh one; with the checkpoint's rest."""
    optimizer, cell = outer.load(plan.optimizer), plan.cell
    data = checkpointed()
    key = state_key(optimizer)
    if key not in data:
        return optimizer, optimizer.init(plan.optimizer_settings, cell.population, cell.dims, cell.seed), data
    return optimizer, optimizer.from_dict(data.pop(key)), data


class TrialRecord:
    """The trial's generations.jsonl, written straight into the run folder.

    Tune's get_trial_dir() is a per-session staging copy that a resumed session would start
    empty and sync over the record, so the path is built from the run folder instead.
    """

    def __init__(self, run_dir: str, plan: TrialPlan):
        trial_id = tune.get_context().get_trial_id()
        # a trial resumed under a release that names it otherwise keeps writing where it began
        earlier = sorted(p for p in Path(run_dir).glob(f"*_{trial_id}") if (p / GENERATIONS_FILE).is_file())
        folder = earlier[0] if earlier else Path(run_dir) / trial_folder_name(plan.name, trial_id)
        self.path = folder / GENERATIONS_FILE
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.cell = plan.cell.as_config()
        self.settings = {metrics.SETTINGS: plan.settings}  # every setting as this trial runs it

    def generation(self, reported: dict, candidates, result: GenerationResult) -> None:
        append_record(
            self.path,
            {
                metrics.KIND: KIND_GENERATION,
                **self.cell,
                **reported,
                **(self.settings if reported[metrics.GENERATION] == 0 else {}),  # the first line says how it ran
                metrics.CANDIDATES: candidates,
                metrics.OUTCOMES: [o.as_dict() for o in result.outcomes],
                metrics.SHARD_DETAIL: result.shard_detail(),
            },
        )

    def final(self, values: dict) -> dict:
        append_record(self.path, {metrics.KIND: KIND_FINAL, **self.cell, **self.settings, **values})
        return values

    def recorded_final(self) -> dict:
        _, final = read_records(self.path)
        return final or {}

    def recorded_scan_best(self) -> float | None:
        """A scan's evaluation pass's best objective, once recorded."""
        passes, _ = read_records(self.path)
        return passes[0][metrics.BEST_OBJECTIVE] if passes else None


def study_trial(plans: Mapping[tuple, dict[str, Any]], run_dir: Path, pools: Mapping[tuple, str] | None = None) -> type:
    """The trial function with its run folder, every trial's plan by cell (`trial_plan.plans_of`) for a run whose
    Tune configs predate plans (a resume of one: its configs hold the cell alone), and this session's lake pool of
    each packed trial, by cell; Tune's class for it, which a resume restores from the trial's newest checkpoint
    where Tune's is gone."""
    trial = tune.with_parameters(run_trial, plans=dict(plans), run_dir=str(Path(run_dir).resolve()),
                                 pools=dict(pools or {}))  # fmt: skip
    return restorable(trial, markers=(STATE_FILE, *LEGACY_STATE_FILES))


def run_trial(
    config: dict[str, Any], plans: dict[tuple, dict[str, Any]], run_dir: str, pools: dict[tuple, str] | None = None
) -> None:
    """Tune function trainable: one optimiser run, or one scan, as its plan says (`config["trial"]`; a config from
    before plans names its cell, whose plan `tune.with_parameters` passes with the run folder); a packed trial's
    inner loop its pool's (`inner.lake_pool`)."""
    for name in ("ray.train", "ray.tune"):  # no "checkpoint created" line per generation
        logging.getLogger(name).setLevel(logging.WARNING)
    plan = TrialPlan.from_dict(config.get(metrics.TRIAL) or plans[Cell.key_of(config)])
    record = TrialRecord(run_dir, plan)
    pool = (pools or {}).get(plan.cell.key)
    if pool is not None:
        inner = PooledInnerLoop(pool, plan.name, stop_requested, inner_iters=plan.inner_iters)
    else:
        inner = ShardedInnerLoop(plan.loop, plan.inner_config, granted_shards(plan.cell.population), stop_requested,
                                 inner_iters=plan.inner_iters)  # fmt: skip
    with inner:
        (run_scan if plan.cell.scan else run_search)(plan, record, inner)


def run_search(plan: TrialPlan, record: TrialRecord, inner: ShardedInnerLoop) -> None:
    """The optimiser's run: per generation ask, train and evaluate, tell, record, report; then the final
    re-evaluation."""
    cell, seeds, params = plan.cell, plan.seeds, plan.cell.optimize_params
    optimizer, state, extra = restore(plan)
    all_failed_run = int(extra.get("all_failed_run", 0))
    while state.generation < cell.generations:
        start, cpu = time.perf_counter(), time.process_time()
        candidates = optimizer.ask(state)
        asked = time.perf_counter()
        rules = candidate_rules(plan, params, candidates)
        result = inner.run(rules, seeds.generation(state.generation), seeds.evaluation)
        evaluated = time.perf_counter()
        state, es_metrics = optimizer.tell(state, candidates, result.objectives)
        end = time.perf_counter()
        optimizer_sec = (asked - start) + (end - evaluated)  # its own seconds: BO's fit and acquisition, mostly
        reported = generation_metrics(plan, cell, es_metrics, candidates, result, end - start, optimizer_sec)
        reported[metrics.CORE_S] = time.process_time() - cpu + result.cpu_s  # the trial's own and its shards'
        record.generation(reported, candidates, result)
        all_failed_run = all_failed_run + 1 if es_metrics[metrics.ALL_FAILED] else 0
        report(reported, {state_key(optimizer): state.to_dict(), "all_failed_run": all_failed_run})
        if all_failed_run >= MAX_ALL_FAILED_IN_A_ROW:
            reason = f"every candidate failed in {all_failed_run} generations in a row; stopping this trial"
            record.final({metrics.STOP_REASON: reason})
            logger.error("%s (cell %s)", reason, cell)
            return
    # A session killed after the final record was written but before Tune saw the last
    # report resumes here: the record is authoritative, so report it again, not recompute.
    final = _finals(record.recorded_final())
    if not final:
        start, cpu, inner_cpu = time.perf_counter(), time.process_time(), inner.cpu_s
        found = final_reevaluation(plan, params, state, seeds, inner)
        found |= equal_budget_reevaluation(plan, record, inner) if found else {}
        core_s = time.process_time() - cpu + inner.cpu_s - inner_cpu
        record.final({**found, metrics.SEC_FINAL: time.perf_counter() - start, metrics.CORE_S_FINAL: core_s})
        final = _finals(found)
    report({metrics.OBJECTIVE: final.get(metrics.FINAL_BEST), metrics.BEST_OBJECTIVE: state.best_objective, **final},
           {state_key(optimizer): state.to_dict()})  # fmt: skip


def run_scan(plan: TrialPlan, record: TrialRecord, inner: ShardedInnerLoop) -> None:
    """The scan: every grid point a candidate, one pass on the evaluation seeds, then one per final seed."""
    cell, seeds = plan.cell, plan.seeds
    grid = scan.scan_grid(cell.dims, plan.scan_points)
    rules = candidate_rules(plan, cell.optimize_params, grid)
    passes = scan.passes(seeds.evaluation, seeds.final, seeds.generation(0))
    first = int(checkpointed().get("scan_pass", 0))
    for p in range(first, len(passes)):
        start, cpu = time.perf_counter(), time.process_time()
        result = inner.run(rules, *passes[p], max_block=scan.BLOCK)
        reported = scan_pass_metrics(p, result, record.recorded_scan_best(), time.perf_counter() - start)
        reported[metrics.CORE_S] = time.process_time() - cpu + result.cpu_s
        record.generation(reported, grid, result)
        report(reported, {"scan_pass": p + 1})
    final = record.recorded_final() or record.final(scan_final(record, grid))
    report({metrics.OBJECTIVE: final.get(metrics.FINAL_BEST), metrics.BEST_OBJECTIVE: final[metrics.SCAN_BEST], **_finals(final)}, {})


def scan_pass_metrics(p: int, result: GenerationResult, evaluation_best: float | None, sec: float) -> dict[str, Any]:
    """A pass's report: its best and the evaluation pass's best (Tune's metric), spread, runtime, census."""
    objectives = result.objectives
    finite = objectives[np.isfinite(objectives)]
    best = result.outcomes[int(np.nanargmax(objectives))] if finite.size else result.outcomes[0]
    pass_best = float(finite.max()) if finite.size else float("nan")
    census = result.census.as_metrics()
    headline = {
        metrics.OBJECTIVE: pass_best,
        metrics.BEST_OBJECTIVE: pass_best if p == 0 or evaluation_best is None else evaluation_best,
        metrics.SEC_PER_GEN: sec,
        metrics.THREADS_OS: census.pop(metrics.THREADS_OS),
    }
    return {
        **{key: headline[key] for key in metrics.REPORT_FIRST},
        metrics.GENERATION: p,
        metrics.OBJECTIVE_MEAN: float(finite.mean()) if finite.size else float("nan"),
        metrics.OBJECTIVE_STD: float(finite.std()) if finite.size else float("nan"),
        metrics.FAILED: int(objectives.size - finite.size),
        metrics.UPPER_BOUND: float("nan") if best.upper_bound is None else best.upper_bound,  # None: no bound known
        metrics.SHARDS: len(result.shards),
        **census,
        **result.timing,
    }


def scan_final(record: "TrialRecord", grid: np.ndarray) -> dict[str, Any]:
    """The scan's best point on the evaluation seeds, and that point re-evaluated on the final seeds (as an ES trial's best)."""
    passes, _ = read_records(record.path)
    evaluation = np.array([num(o[metrics.OBJECTIVE]) for o in passes[0][metrics.OUTCOMES]])
    k = int(np.nanargmax(evaluation)) if np.isfinite(evaluation).any() else 0
    finals = np.array([num(p[metrics.OUTCOMES][k][metrics.OBJECTIVE]) for p in passes[1:]])
    out = {metrics.SCAN_BEST: float(evaluation[k]), metrics.SCAN_BEST_POINT: grid[k].tolist(), metrics.FINAL_SEEDS: len(finals)}
    if finals.size:
        out[metrics.FINAL_BEST] = float(np.nanmean(finals)) if np.isfinite(finals).any() else float("nan")
        out[metrics.FINAL_BEST_STD] = float(np.nanstd(finals, ddof=1)) if np.isfinite(finals).sum() > 1 else 0.0
    return out


def _finals(final: dict) -> dict:
    return {k: v for k, v in final.items() if k.startswith(metrics.FINAL)}


def final_reevaluation(
    plan: TrialPlan, params: Sequence[str], state: Any, seeds: Seeds, inner: ShardedInnerLoop
) -> dict[str, float]:
    """Retrain and evaluate the best-so-far candidate and the final incumbent (the ES's mean) on fresh seeds: their
    means and SDs, and seed by seed (`FINAL_BY_SEED`, which the run's finals.csv is made of).

    The best of noisy evaluations is biased upward (more so for larger
    populations); these values are what the summary's verdicts use.
    """
    if not seeds.final or state.best_candidate is None:
        return {}
    rules = candidate_rules(plan, params, np.array([state.best_candidate, state.mean]))
    values = _retrained(inner, rules, seeds.final)
    out: dict[str, Any] = {
        metrics.FINAL_BY_SEED: {"seeds": list(seeds.final), "best": values[:, 0].tolist(), "mean": values[:, 1].tolist()}
    }
    for j, (mean_key, std_key) in enumerate(((metrics.FINAL_BEST, metrics.FINAL_BEST_STD), (metrics.FINAL_MEAN, metrics.FINAL_MEAN_STD))):
        finite = np.isfinite(values[:, j])
        out[mean_key] = float(np.nanmean(values[:, j])) if finite.any() else float("nan")
        out[std_key] = float(np.nanstd(values[:, j], ddof=1)) if finite.sum() > 1 else 0.0
    out[metrics.FINAL_SEEDS] = len(seeds.final)
    return out


def equal_budget_reevaluation(plan: TrialPlan, record: TrialRecord, inner: ShardedInnerLoop) -> dict:
    """At each smaller budget its study also compares this run at (`[decide] equal_budget`): its incumbent then —
    read off its own records as `--reevaluate --at-evaluations` reads a run's table (`study_data.incumbents`) —
    retrained on the same final seeds, as a block of its own (candidate indices 0 and 1, as the final rules)."""
    cell, seeds = plan.cell, plan.seeds
    if not plan.equal_evaluations or not seeds.final:
        return {}
    generations, _ = read_records(record.path)
    rows = pd.DataFrame(generation_rows(generations, cell.population, cell.optimize_params, plan.rule_specs_by_name))
    out = {}
    for evaluations in plan.equal_evaluations:
        rules = incumbents.incumbent(rows, evaluations, cell.optimize_params, dict(plan.fixed_rules))
        values = _retrained(inner, list(rules), seeds.final)
        then = incumbents.last_row(rows, evaluations)
        out[str(evaluations)] = {
            "evaluations": int(then["evaluations"]), "generation": int(then["generation"]),
            metrics.BEST_OBJECTIVE: float(then["best_so_far"]),
            metrics.FINAL_BEST: _nanmean(values[:, 0]), metrics.FINAL_MEAN: _nanmean(values[:, 1]),
            "best": values[:, 0].tolist(), "mean": values[:, 1].tolist(),
        }  # fmt: skip
    return {metrics.FINAL_AT_EVALUATIONS: out}


def _retrained(inner: ShardedInnerLoop | PooledInnerLoop, rules: Sequence, seeds: Sequence[int]) -> np.ndarray:
    """(seeds, rule sets): each rule set retrained and evaluated on each seed, every seed's lakes one block."""
    lakes, eval_seeds = seed_lakes(rules, seeds)
    return inner.run_lakes(lakes, eval_seeds).objectives.reshape(len(seeds), len(rules))


def _nanmean(values: np.ndarray) -> float:
    return float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
