"""The plan of a run: `plan_run` (shards per trial and the ETA, for a session about to start) and `dry_run`
(every check a run makes, then the grid, its settings, the plan — per stage and at the most with
`--until-decided` — and the held-out step's cost; nothing written but the calibration cache).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from bilevel_tune.cli.options import RunOptions, UsageError
from bilevel_tune.cli.resolve import REPO_ROOT, resolve_run, wandb_mode
from bilevel_tune.planning import calibration, packing
from bilevel_tune.planning.plan import Plan, PlanError, describe_plan, hms, make_plan
from bilevel_tune.runtime import cluster
from bilevel_tune.study_data.definition import Study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import RunFolderError, find_run
from bilevel_tune.study_data.run_store import StoreError, open_store
from bilevel_tune.study_data.settings import describe as describe_settings
from bilevel_tune.study_data.settings import shown
from bilevel_tune.study_data.stages import at_most


def plan_run(
    study: Study, options: RunOptions, cpus: int, mode: str, skip: set = frozenset(), probe: bool = True
) -> Plan:
    """Shards per trial for this cluster (cells in Tune's order, finished ones left out), with its ETA.

    A dry run probes this machine when it has no figures yet; a real run plans by work alone then.
    """
    from bilevel_tune.tune_edge.experiment import tune_order

    if options.cpus_per_trial is not None and options.cpus_per_trial > cpus:
        raise UsageError(f"--cpus-per-trial {options.cpus_per_trial} exceeds the cluster's {cpus} CPUs")
    cells = [c for c in tune_order(study) if c.key not in skip]
    busy = min(cpus, sum(c.population for c in cells) or 1)
    try:
        model = calibration.cost_model(
            study,
            mode,
            options.thread_cap,
            busy,
            refresh=options.recalibrate,
            probe_if_missing=probe or options.recalibrate,
        )
        packs = packing.packs_of(study, cells, cpus) if cpus > 1 else []  # one CPU: a pool would stall every other trial
        return make_plan(cells, study.budget, cpus, model, options.cpus_per_trial, options.max_concurrent, packs)
    except PlanError as err:
        raise UsageError(str(err)) from None


def dry_run(options: RunOptions, out: Callable[[str], None] = print) -> Plan:
    """Validate everything a run would, then print the grid, the plan and the ETA; writes nothing but the calibration cache."""
    if options.resume:
        raise UsageError("--dry-run plans a new run; drop --resume")
    study, _, _ = resolve_run(options)
    mode = wandb_mode(options)
    cpus = options.num_cpus or os.cpu_count() or 1
    address = cluster.requested_address(options.address)
    if address is not None:
        cpus = _cluster_cpus(address, options.address)
    b, design = study.budget, compile_design(study)
    out(
        f"study {study.name} ({study.source}), budget {design.budget_label}{' (smoke)' if design.smoke else ''}, inner loop {study.inner}"
    )
    further = "".join(f" × {key} [{', '.join(shown(v) for v in values)}]" for key, values in study.axes)
    out(
        f"{len(design.cells)} trials = population {list(study.populations)} × optimize_params "
        f"{[list(p) for p in study.optimize_params]} × seed {list(study.seeds)}{further}"
    )
    if study.scan:
        sizes = " and ".join(
            sorted({f"{c.population} ({'×'.join([str(study.scan)] * c.dims)})" for c in design.scan_cells})
        )
        out(
            f"+ {len(design.scan_cells)} scan trials = optimize_params × seed: grid points {sizes}, each trained and "
            f"evaluated as a candidate, then re-evaluated on the {study.budget.final_eval_seeds} final seeds"
        )
    out("settings:")
    values = {"budget.generations": dict(b.generations) if not isinstance(b.generations, int) else b.generations}
    values = values if b.evaluations is None else {}  # the evaluations set each cell's generations
    for line in describe_settings(
        {**study.settings, **values}, study.inner.startswith("appo"), study.table, design.optimizers
    ):
        out(line)
    out(f"W&B {mode}")
    plan = plan_run(study, options, cpus, mode)
    if options.until_decided:
        from bilevel_tune.verdicts.decide import describe_plan as decision_plan

        out(f"stages (--until-decided): {decision_plan(design)}")
        for line in _power_lines(study, options):
            out(line)
        out(f"stage 1: the grid's {len(study.seeds)} seeds in every cell")
    describe_plan(study, plan, out, what="stage 1" if options.until_decided else "the whole command")
    if options.until_decided:
        _describe_most(study, options, cpus, mode, plan, out)
    if study.final.learners:
        held_out = describe_held_out(study, None, (), cpus, options, out)
        if plan.model.calibrated and not options.until_decided:
            out(f"ETA {hms(plan.eta_s + held_out)} for the whole command with its held-out step")
    return plan


def describe_held_out(study: Study, trials, extra, cpus: int, options: RunOptions, out, done=None) -> float:
    """The held-out step's jobs and ETA, each learner probed on this machine (a Ray of the probe's own); returns
    the ETA in seconds."""
    from bilevel_tune.cli import reevaluation
    from bilevel_tune.runtime import ray_init
    from bilevel_tune.study_data.learners import learners_of

    learners = learners_of(study, extra)
    out(f"held-out learners, after the trials: {', '.join(learner.label for learner in learners)}")
    with ray_init.scratch_ray(
        ray_init.RuntimeConfig(num_cpus=cpus, thread_cap=options.thread_cap, log_to_driver=False)
    ):
        return reevaluation.describe_cost(study, trials, learners, cpus, out, done)


def _power_lines(study: Study, options: RunOptions) -> list[str]:
    """What the plan can decide (`verdicts.power`), at the within-seed SDs of an earlier run of this grid: the
    shipped result of this study and loop, else the latest run of this study under the results root."""
    from bilevel_tune.verdicts.power import plan_lines

    scores, source = _earlier_scores(study, options)
    return plan_lines(compile_design(at_most(study)), scores, source)


def _earlier_scores(study: Study, options: RunOptions) -> tuple[dict | None, str]:
    """Each group's scores by seed in an earlier run of this grid (its look scores, `RunStore.look_scores`)."""
    from bilevel_tune.report.answers import by_group

    shipped = REPO_ROOT / "docs" / "results" / f"{study.name}-{study.inner}"
    candidates = [(shipped, f"docs/results/{shipped.name}")] if shipped.is_dir() else []
    try:
        earlier = find_run(Path(options.results), study.name, None)
        candidates.append((earlier, str(earlier)))
    except RunFolderError:
        pass
    for folder, label in candidates:
        try:
            store = open_store(folder)
            scores = by_group(store.look_scores(store.study.decide.score))
        except (StoreError, OSError, ValueError, KeyError):
            continue
        if any(len(seeds) >= 2 for seeds in scores.values()):
            return scores, label
    return None, ""


def _describe_most(study: Study, options: RunOptions, cpus: int, mode: str, first: Plan, out) -> None:
    """The plan at the most: every comparison open to the last stage, each stage run after the one before."""
    most = at_most(study)
    planned = compile_design(most)
    extra = planned.all_seeds[len(study.seeds) :]
    out(
        f"at the most (every comparison open to the end): {len(planned.trial_cells)} trials, the seeds "
        f"{', '.join(map(str, extra)) or 'none'} added in stages of {study.decide.seeds_per_stage}"
    )
    etas, timed = [first.eta_s], first.model.calibrated
    for stage in range(2, len(most.stages) + 2):
        keys = {c.key for c in planned.stage_cells(stage)}
        plan = plan_run(most, options, cpus, mode, skip={c.key for c in planned.trial_cells if c.key not in keys})
        etas.append(plan.eta_s)
        out(f"  stage {stage}: {len(keys)} trials" + (f", ETA {hms(plan.eta_s)}" if timed else ""))
    if timed:
        out(f"ETA {hms(sum(etas))} for every stage, one after another")


def _cluster_cpus(address: str, explicit: str | None) -> int:
    import ray

    try:
        address = cluster.probe_address(address, cluster.address_label(explicit))
    except cluster.ClusterError as err:
        raise UsageError(str(err)) from None
    ray.init(address=address, logging_level="ERROR", log_to_driver=False)
    try:
        return cluster.cluster_cpus()
    finally:
        ray.shutdown()
