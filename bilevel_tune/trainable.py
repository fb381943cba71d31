"""One Tune trial = one ES run over the mechanism's searched rules (DESIGN §7).

A thin adapter: restore the ES state from `tune.get_checkpoint()`, then per
generation ask → inner loop (reset, K × train, evaluate) → tell → append to
`generations.jsonl` → `tune.report(metrics, checkpoint=ES state)`; after the
last generation, the final re-evaluation (`final/…`). The inner loop runs
in its own actor inside the trial's placement group (`TRIAL_RESOURCES`).
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import ray
from ray import tune

from bilevel_tune import es
from bilevel_tune import metrics as M
from bilevel_tune.actor import InnerLoopConfig, make_policy_actor
from bilevel_tune.analytic import AnalyticLoop
from bilevel_tune.definition import Study, load_inner_class, trial_dirname
from bilevel_tune.records import GENERATIONS_FILE, KIND_FINAL, KIND_GENERATION, append_record, read_records
from bilevel_tune.world import Rules

logger = logging.getLogger(__name__)
# An empty head bundle (the trial function takes no CPU) and one for the inner-loop actor:
# two trials run on two cores, and the nested actor always has its reservation.
TRIAL_RESOURCES = tune.PlacementGroupFactory([{}, {"CPU": 1}])
STATE_FILE = "es_state.json"
MAX_ALL_FAILED_IN_A_ROW = 3


def inner_config(study: Study) -> InnerLoopConfig:
    b = study.budget
    return InnerLoopConfig(
        num_farms=b.num_farms,
        horizon=b.horizon,
        smoothing=study.smoothing,
        hidden=b.hidden,
        econ_weight=study.econ_weight,
        sus_weight=study.sus_weight,
    )


def start_inner_loop(study: Study):
    """The trial's inner-loop actor, holding the trial's one-CPU bundle."""
    config = inner_config(study)
    if study.inner == "appo":
        return make_policy_actor(config)
    cls = AnalyticLoop if study.inner == "analytic" else load_inner_class(study.inner)
    return ray.remote(cls).options(num_cpus=1, max_restarts=0).remote(config)


class Seeds:
    """Seeds flow from the trial's seed: ES noise, each generation's RLlib/env seed, evaluation seeds."""

    def __init__(self, seed: int, eval_episodes: int, final_eval_seeds: int):
        self.seed = seed
        self.evaluation = [int(x) for x in np.random.SeedSequence([seed, 1]).generate_state(eval_episodes)]
        self.final = [int(x) for x in np.random.SeedSequence([seed, 2]).generate_state(max(final_eval_seeds, 1))][
            :final_eval_seeds
        ]

    def generation(self, g: int) -> int:
        return int(np.random.SeedSequence([self.seed, 0, g]).generate_state(1)[0])


def candidate_rules(study: Study, params, candidates) -> list[dict[str, float]]:
    base = Rules.from_physical(study.fixed_rules)
    return [Rules.from_search(params, u, base).as_dict() for u in np.atleast_2d(candidates)]


def physical(params, u, base: dict) -> dict[str, float]:
    rules = Rules.from_search(params, u, Rules.from_physical(base))
    return {name: getattr(rules, name) for name in params}


def generation_metrics(study, params, es_metrics, candidates, outcomes, census, sec) -> dict[str, Any]:
    """The flat, scalar metrics Tune reports (REPORT_FIRST first: Tune's live table shows four)."""
    objectives = np.array([o["objective"] for o in outcomes], dtype=float)
    best_k = int(np.nanargmax(objectives)) if np.isfinite(objectives).any() else 0
    out = {
        M.OBJECTIVE: es_metrics[M.GEN_BEST_OBJECTIVE],
        M.BEST_OBJECTIVE: es_metrics[M.BEST_OBJECTIVE],
        M.SEC_PER_GEN: sec,
        M.THREADS_OS: census[M.THREADS_OS],
        M.GENERATION: es_metrics[M.GENERATION],
        M.SIGMA: es_metrics[M.SIGMA],
        M.OBJECTIVE_MEAN: es_metrics[M.OBJECTIVE_MEAN],
        M.OBJECTIVE_STD: es_metrics[M.OBJECTIVE_STD],
        M.BEST_GENERATION: es_metrics[M.BEST_GENERATION],
        M.FAILED: es_metrics[M.FAILED],
        M.UPPER_BOUND: outcomes[best_k][M.UPPER_BOUND],
        **{k: v for k, v in census.items() if k != M.THREADS_OS},
    }
    for rule, value in physical(params, es_metrics[M.MEAN], study.fixed_rules).items():
        out[M.MEAN_RULE + rule] = value
    if es_metrics[M.BEST_CANDIDATE] is not None:
        for rule, value in physical(params, es_metrics[M.BEST_CANDIDATE], study.fixed_rules).items():
            out[M.BEST_RULE + rule] = value
    for key in M.DIAGNOSTICS:
        out[M.BEST_DIAG + key] = outcomes[best_k][key]
    for k, (u, o) in enumerate(zip(candidates, outcomes)):
        out[f"cand/{k}/objective"] = o["objective"]
        for rule, value in physical(params, u, study.fixed_rules).items():
            out[f"cand/{k}/{rule}"] = value
    return out


def _checkpoint(state: es.ESState, extra: dict | None = None):
    directory = tempfile.mkdtemp(prefix="es-ckpt-")
    Path(directory, STATE_FILE).write_text(json.dumps({"es_state": state.to_dict(), **(extra or {})}))
    return tune.Checkpoint.from_directory(directory)


def _restore(study: Study, cell: dict) -> tuple[es.ESState, dict]:
    checkpoint = tune.get_checkpoint()
    if checkpoint is None:
        return es.init(study.es_config(cell["population"]), len(cell["optimize_params"]), cell["seed"]), {}
    with checkpoint.as_directory() as directory:
        data = json.loads(Path(directory, STATE_FILE).read_text())
    return es.ESState.from_dict(data.pop("es_state")), data


class InnerLoopHandle:
    """The trial's inner-loop actor; replaced when a learner stop cannot be confirmed."""

    _warned = False

    def __init__(self, study: Study):
        self.study = study
        self.actor = start_inner_loop(study)

    def run(self, rules, seed: int, eval_seeds, inner_iters: int) -> dict[str, Any]:
        """reset → K × train → evaluate; the evaluation, with the seconds each phase took."""
        t0 = time.perf_counter()
        if not ray.get(self.actor.reset.remote(rules, seed)):
            self._replace()
            ray.get(self.actor.reset.remote(rules, seed))
        t1 = time.perf_counter()
        for _ in range(inner_iters):
            ray.get(self.actor.train.remote())
        t2 = time.perf_counter()
        evaluation = ray.get(self.actor.evaluate.remote(eval_seeds))
        evaluation["timing"] = {M.SEC_RESET: t1 - t0, M.SEC_TRAIN: t2 - t1, M.SEC_EVALUATE: time.perf_counter() - t2}
        return evaluation

    def _replace(self):
        if not InnerLoopHandle._warned:
            logger.warning(
                "could not confirm that RLlib's learner thread stopped on Ray %s; replacing the inner-loop actor "
                "every generation so no thread accumulates",
                ray.__version__,
            )
            InnerLoopHandle._warned = True
        ray.kill(self.actor)
        self.actor = start_inner_loop(self.study)

    def close(self):
        try:
            ray.get(self.actor.stop.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - the actor may already be dead; it is killed below either way
            pass
        ray.kill(self.actor)


class TrialRecord:
    """The trial's generations.jsonl, written straight into the run folder.

    Tune's get_trial_dir() is a per-session staging copy that a resumed session would start
    empty and sync over the record, so the path is built from the run folder instead.
    """

    def __init__(self, run_dir: str, study: Study, config: dict, cell: dict):
        self.path = (
            Path(run_dir) / trial_dirname(study.name, config, tune.get_context().get_trial_id()) / GENERATIONS_FILE
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.cell = cell

    def generation(self, metrics: dict, candidates, outcomes) -> None:
        append_record(
            self.path, {"kind": KIND_GENERATION, **self.cell, **metrics, "candidates": candidates, "outcomes": outcomes}
        )

    def final(self, values: dict) -> None:
        append_record(self.path, {"kind": KIND_FINAL, **self.cell, **values})

    def recorded_final(self) -> dict:
        _, final = read_records(self.path)
        return final or {}


def run_trial(config: dict[str, Any], study: dict[str, Any], run_dir: str) -> None:
    """Tune function trainable: one ES run for one grid cell (`tune.with_parameters` passes study and run folder)."""
    for name in ("ray.train", "ray.tune"):  # no "checkpoint created" line per generation
        logging.getLogger(name).setLevel(logging.WARNING)
    study = Study.from_dict(study)
    params, seed = tuple(config["optimize_params"]), int(config["seed"])
    cell = {"population": int(config["population"]), "optimize_params": params, "seed": seed}
    generations = study.budget.generations_for(cell["population"])
    seeds = Seeds(seed, study.budget.eval_episodes, study.budget.final_eval_seeds)
    record = TrialRecord(run_dir, study, config, cell)
    state, extra = _restore(study, cell)
    all_failed_run = int(extra.get("all_failed_run", 0))
    inner = InnerLoopHandle(study)
    try:
        while state.generation < generations:
            start = time.perf_counter()
            candidates = es.ask(state)
            rules = candidate_rules(study, params, candidates)
            evaluation = inner.run(
                rules, seeds.generation(state.generation), seeds.evaluation, study.budget.inner_iters
            )
            outcomes = evaluation["candidates"]
            state, es_metrics = es.tell(state, candidates, [o["objective"] for o in outcomes])
            elapsed = time.perf_counter() - start
            metrics = generation_metrics(study, params, es_metrics, candidates, outcomes, evaluation["census"], elapsed)
            metrics.update(evaluation["timing"])
            record.generation(metrics, candidates, outcomes)
            all_failed_run = all_failed_run + 1 if es_metrics[M.ALL_FAILED] else 0
            tune.report(metrics, checkpoint=_checkpoint(state, {"all_failed_run": all_failed_run}))
            if all_failed_run >= MAX_ALL_FAILED_IN_A_ROW:
                reason = f"every candidate failed in {all_failed_run} generations in a row; stopping this trial"
                record.final({"stop_reason": reason})
                logger.error("%s (cell %s)", reason, cell)
                return
        # A session killed after the final record was written but before Tune saw the last
        # report resumes here: the record is authoritative, so report it again, not recompute.
        final = {k: v for k, v in record.recorded_final().items() if k.startswith(M.FINAL)}
        if not final:
            final = final_reevaluation(study, params, state, seeds, inner)
            record.final(final)
        summary = {M.OBJECTIVE: final.get(M.FINAL + "best"), M.BEST_OBJECTIVE: state.best_objective, **final}
        tune.report(summary, checkpoint=_checkpoint(state, {"final": True}))
    finally:
        inner.close()


def final_reevaluation(
    study: Study, params, state: es.ESState, seeds: Seeds, inner: InnerLoopHandle
) -> dict[str, float]:
    """Retrain and evaluate the best-so-far candidate and the final mean on fresh seeds.

    The best of noisy evaluations is biased upward (more so for larger
    populations); these values are what the summary's verdicts use.
    """
    if not seeds.final or state.best_candidate is None:
        return {}
    finalists = np.array([state.best_candidate, state.mean])
    rules = candidate_rules(study, params, finalists)
    per_seed = []
    for seed in seeds.final:
        outcome = inner.run(rules, seed, [seed], study.budget.inner_iters)["candidates"]
        per_seed.append([o["objective"] for o in outcome])
    values = np.array(per_seed, dtype=float)
    out = {}
    for j, name in enumerate(("best", "mean")):
        out[f"{M.FINAL}{name}"] = float(np.nanmean(values[:, j])) if np.isfinite(values[:, j]).any() else float("nan")
        out[f"{M.FINAL}{name}_std"] = (
            float(np.nanstd(values[:, j], ddof=1)) if np.isfinite(values[:, j]).sum() > 1 else 0.0
        )
    out[f"{M.FINAL}seeds"] = len(seeds.final)
    return out


def read_trial(trial_dir: Path):
    return read_records(Path(trial_dir) / GENERATIONS_FILE)
