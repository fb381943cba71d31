"""The outer optimisers compared at equal inner-loop evaluations (docs/es.md): a study that runs another optimiser
than the ES, or several, and scans its rules.

A run's own best is the maximum of many noisy evaluations, biased upward; what an optimiser delivers is the rules it
would return — its incumbent (the ES's and CMA-ES's mean, BO's best posterior mean, random search's best, Optuna's best trial). Each
generation's incumbent is read off the rules scan's landscape of the same seed and mechanism (the grid's values on
the final seeds, linear between grid points), and compared with the landscape's best:

* `incumbent_table` — per trial and generation: the evaluations so far, and the incumbent's value and regret;
* `optimizer_table` (optimizers.csv) — per optimiser and mechanism: the evaluations each needs before its incumbent
  comes within ε of the scan's best and stays there (`evaluations_to_eps`, the median over seeds, with the fewest
  and most, and how many seeds got there at all), the incumbent's regret at fixed fractions of the budget
  (`regret_1/16` … `regret_1`) and the area under its regret curve over the budget (`regret_auc`: the mean
  regret per evaluation, so optimisers that all get there are told apart by how fast), the final re-evaluation and
  its regret against the scan's, and the optimiser's own seconds as a share of the run's;
* `soonest` — per mechanism, the optimiser whose median run comes within ε soonest, named the winner only where an
  exact one-sided sign test over the matched seeds (each seed runs every optimiser) separates it from every other
  at family-wise α 0.05 (Holm over the others).

ε is `[summary] eps`, else the rules scan's own noise (`scan_noise`: the SD over its final seeds at its best
point), else the study's margin (`[decide] margin`), else 0.01. pandas and numpy only.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pandas as pd
from scipy import stats
from scipy.interpolate import RegularGridInterpolator

from bilevel_tune.core import metrics
from bilevel_tune.core.outer import LABELS, label_of
from bilevel_tune.report.columns import FINAL, MECHANISM, OPTIMIZER
from bilevel_tune.report.section import Section, Summary
from bilevel_tune.study_data.run_folder import OPTIMIZERS_CSV
from bilevel_tune.study_data.settings import is_setting_key
from bilevel_tune.verdicts import effects

DEFAULT_EPS = 0.01
BUDGET_FRACTIONS = (Fraction(1, 16), Fraction(1, 8), Fraction(1, 4), Fraction(1, 2), Fraction(1))
SOONEST_ALPHA = 0.05  # the soonest line's sign tests, family-wise over an optimiser's rivals (Holm)
BY_SEED = "evaluations_to_eps_by_seed"  # the table's per-seed figures the sign tests read (not in optimizers.csv)
LANDSCAPE = "final_objective"  # the scan's value at a grid point: retrained on the final seeds, the mean


def shown_here(design) -> bool:
    """Does the study compare optimisers (or run another than the ES) and scan its rules?"""
    return design.scan is not None and design.optimizers != ("es",)


def epsilon(design, scans: pd.DataFrame | None = None) -> float:
    """ε: `[summary] eps`, else the rules scan's own noise — the SD over its final seeds at each scan's best point
    (the mean over scans): an incumbent that close to the best cannot be told from it by re-evaluation —, else the
    study's margin, else 0.01."""
    return next(v for v in (design.summary.eps, scan_noise(scans), design.decide.margin, DEFAULT_EPS) if v is not None)


def scan_noise(scans: pd.DataFrame | None) -> float | None:
    """The SD of the final seeds' scores at each scan's best grid point, the mean over scans; None without one."""
    if scans is None or scans.empty or "final_objective_std" not in scans:
        return None
    best = scans.loc[scans.groupby(["optimize_params", "seed"], sort=False)[LANDSCAPE].idxmax()]
    sd = best["final_objective_std"].to_numpy(dtype=float)
    return round(float(np.nanmean(sd)), 4) if np.isfinite(sd).any() and np.nanmean(sd) > 0 else None  # a threshold: 4 places


def table_epsilon(table: pd.DataFrame) -> float:
    """The ε a table was made with."""
    return float(table["eps"].iloc[0])


def incumbent_table(generations: pd.DataFrame, scans: pd.DataFrame) -> pd.DataFrame:
    """Per trial and generation with a scan of its seed and mechanism: the incumbent's value on that landscape, the
    landscape's best, and the regret between them."""
    if generations.empty or scans.empty:
        return pd.DataFrame()
    parts = []
    for (params, seed), scan in scans.groupby(["optimize_params", "seed"], sort=False):
        runs = generations[(generations["optimize_params"] == params) & (generations["seed"] == seed)]
        if runs.empty:
            continue
        names = params.split(",")
        column = LANDSCAPE if scan[LANDSCAPE].notna().all() else metrics.OBJECTIVE
        value = _landscape(scan, names, column)
        runs = runs.sort_values("generation")
        runs = runs.assign(
            incumbent_value=value(runs[[metrics.MEAN_RULE + n for n in names]].to_numpy(dtype=float)),
            landscape_best=float(scan[column].max()),
        )
        parts.append(runs.assign(incumbent_regret=runs["landscape_best"] - runs["incumbent_value"]))
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame()


def _landscape(scan: pd.DataFrame, names: list[str], column: str):
    """The scan's values as a function of the physical rules, linear between grid points (row-major grid)."""
    axes = [np.unique(scan[n].to_numpy(dtype=float)) for n in names]
    values = scan.sort_values(names)[column].to_numpy(dtype=float).reshape([len(a) for a in axes])
    interpolate = RegularGridInterpolator(axes, values, bounds_error=False, fill_value=None)
    return lambda points: interpolate(np.clip(points, [a[0] for a in axes], [a[-1] for a in axes]))


def evaluations_to_eps(run: pd.DataFrame, eps: float) -> float:
    """The evaluations after which a run's incumbent is within ε of the landscape's best and stays there; inf when
    its last incumbent is not."""
    within = (run.sort_values("generation")["incumbent_regret"] <= eps).to_numpy()
    if not within.size or not within[-1]:
        return float("inf")
    first = len(within) - int(np.argmin(within[::-1])) if not within.all() else 0
    return float(run.sort_values("generation")["evaluations"].to_numpy()[first])


def regret_at(run: pd.DataFrame, fraction: Fraction) -> float:
    """The incumbent's regret after `fraction` of the run's evaluations (its last generation at or before them)."""
    run = run.sort_values("generation")
    before = run[run["evaluations"] <= fraction * run["evaluations"].max()]
    return float(before["incumbent_regret"].iloc[-1]) if not before.empty else float("nan")


def regret_auc(run: pd.DataFrame) -> float:
    """The area under the incumbent's regret over the run's budget, as a share of it: each generation's regret held
    for the evaluations it spent — the mean regret per evaluation."""
    run = run.sort_values("generation")
    spent = np.diff(np.concatenate([[0.0], run["evaluations"].to_numpy(dtype=float)]))
    return float((run["incumbent_regret"].to_numpy(dtype=float) * spent).sum() / spent.sum())


def optimizer_table(trials: pd.DataFrame, incumbents: pd.DataFrame, eps: float) -> pd.DataFrame:
    """One row per optimiser and mechanism (optimizers.csv)."""
    if incumbents.empty or OPTIMIZER not in trials:
        return pd.DataFrame()
    key = ["population", "optimize_params", "seed", *(c for c in trials.columns if is_setting_key(c))]
    per_run = incumbents.groupby(key, sort=False).apply(
        lambda run: pd.Series(
            {"evaluations_to_eps": evaluations_to_eps(run, eps), "incumbent_regret": run["incumbent_regret"].iloc[-1],
             **{f"regret_{f}": regret_at(run, f) for f in BUDGET_FRACTIONS}, "regret_auc": regret_auc(run)}
        ),
        include_groups=False,
    )
    done = trials[trials["generations"] > 0].merge(per_run.reset_index(), on=key, how="left")
    rows = []
    for (optimizer, mechanism), runs in done.groupby([OPTIMIZER, MECHANISM], sort=False):
        scanned = runs[runs["evaluations_to_eps"].notna()]
        steps = np.sort(scanned["evaluations_to_eps"].to_numpy(dtype=float))
        finite = steps[np.isfinite(steps)]
        median = float(np.median(steps)) if steps.size else float("nan")
        rows.append(
            {
                OPTIMIZER: optimizer,
                "optimiser": label_of(optimizer),
                MECHANISM: mechanism,
                "seeds": len(scanned),
                "evaluations": int(runs["evaluations"].max()),
                "eps": eps,
                "evaluations_to_eps": median if np.isfinite(median) else float("nan"),
                "evaluations_to_eps_min": float(finite.min()) if finite.size else float("nan"),
                "evaluations_to_eps_max": float(finite.max()) if finite.size == steps.size and steps.size else float("nan"),
                "seeds_within_eps": int(finite.size),
                "incumbent_regret": float(scanned["incumbent_regret"].mean()),
                "incumbent_regret_sd": _sd(scanned["incumbent_regret"]),
                **{f"regret_{f}": float(scanned[f"regret_{f}"].mean()) for f in BUDGET_FRACTIONS},
                "regret_auc": float(scanned["regret_auc"].mean()),
                "regret_auc_sd": _sd(scanned["regret_auc"]),
                BY_SEED: {int(seed): float(v) for seed, v in zip(scanned["seed"], scanned["evaluations_to_eps"])},
                FINAL: float(runs[FINAL].mean()),
                "final_objective_sd": _sd(runs[FINAL]),
                "final_regret": float(runs["final_regret"].mean()) if "final_regret" in runs else float("nan"),
                "optimizer_share": float((runs["optimizer_s"] / runs["wall_s"]).mean()),
            }
        )
    table = pd.DataFrame(rows)
    return table.sort_values([MECHANISM, OPTIMIZER], key=lambda c: c.map(_place) if c.name == OPTIMIZER else c)


def _place(optimizer: str) -> tuple[int, str]:
    """A built-in optimiser in its registry's order, a user's (`module:Class`) after them, by name."""
    order = list(LABELS)
    return (order.index(optimizer), "") if optimizer in order else (len(order), str(optimizer))


def _sd(values: pd.Series) -> float:
    return float(values.std(ddof=1)) if values.notna().sum() > 1 else float("nan")


def render(table: pd.DataFrame, eps: float) -> list[str]:
    """The summary's section: the table, and how to read it."""
    if table.empty:
        return []
    shown = table.assign(
        to_eps=[_to_eps(r) for r in table.itertuples()],
        incumbent=[f"{r.incumbent_regret:+.4f} ± {r.incumbent_regret_sd:.4f}" for r in table.itertuples()],
        final=[f"{getattr(r, FINAL):.4f} ± {r.final_objective_sd:.4f}" for r in table.itertuples()],
        share=[f"{100 * r.optimizer_share:.1f} %" for r in table.itertuples()],
        at_budget=[" · ".join(f"{row[f'regret_{f}']:+.4f}" for f in BUDGET_FRACTIONS) for _, row in table.iterrows()],
        auc=[f"{r.regret_auc:+.4f} ± {r.regret_auc_sd:.4f}" for r in table.itertuples()],
    )
    columns = {
        "optimiser": "optimiser",
        MECHANISM: "mechanism",
        "evaluations": "evaluations per run",
        "to_eps": f"evaluations to within {eps:g} of the scan's best (median; fewest–most; seeds)",
        "incumbent": "incumbent's regret at the end (mean ± SD)",
        "at_budget": f"its regret at {' · '.join(str(f) for f in BUDGET_FRACTIONS)} of the budget (means)",
        "auc": "mean regret over the budget (area under its curve; mean ± SD)",
        "final": "final objective (mean ± SD)",
        "share": "optimiser's own share of the wall",
    }
    return [
        f"## Optimisers at equal evaluations (ε = {eps:g})",
        "",
        "Each generation's incumbent — the rules the optimiser would return then (the ES's and CMA-ES's mean, BO's "
        f"best posterior mean, random search's best{_optuna_incumbent(table)}) — read off the rules scan's landscape "
        "of its seed (the grid's "
        "values on the final seeds, linear between points), not off its own noisy best. A run counts its "
        "evaluations until its incumbent comes within ε of the landscape's best and stays there; a run whose last "
        "incumbent is not within ε never got there. optimizers.csv has the figures.",
        "",
        shown[list(columns)].rename(columns=columns).to_markdown(index=False),
        "",
        *soonest(table),
    ]


def _optuna_incumbent(table: pd.DataFrame) -> str:
    """Optuna's incumbent, named where the table has its runs (a table without them reads as it did)."""
    return ", Optuna's best trial" if "optuna" in set(table.get(OPTIMIZER, ())) else ""


def csv_table(table: pd.DataFrame) -> pd.DataFrame:
    """optimizers.csv: the table less its per-seed figures."""
    return table.drop(columns=[BY_SEED], errors="ignore")


def separated(best: dict, rival: dict) -> float:
    """The exact one-sided sign test's p-value that `best` needs fewer evaluations than `rival` over their matched
    seeds (a seed that never got there counts as more than any that did; ties dropped)."""
    shared = sorted(set(best) & set(rival))
    wins = sum(best[s] < rival[s] for s in shared)
    losses = sum(best[s] > rival[s] for s in shared)
    return float(stats.binom.sf(wins - 1, wins + losses, 0.5)) if wins + losses else 1.0


def soonest(table: pd.DataFrame) -> list[str]:
    """Per mechanism, one line: the optimiser whose incumbent comes within ε soonest (the median over seeds), named
    the winner only where the sign tests over matched seeds separate it from every other (`separated`, Holm at
    SOONEST_ALPHA), with the evaluations that saves against the ES's; else what it is not separated from."""
    lines = []
    for mechanism, rows in table.groupby(MECHANISM, sort=False):
        reached = rows[rows["evaluations_to_eps"].notna()]
        if reached.empty:
            lines.append(f"- {mechanism}: no optimiser's median run came within ε of the scan's best in its budget.")
            continue
        best = reached.loc[reached["evaluations_to_eps"].idxmin()]
        rivals = rows[rows[OPTIMIZER] != best[OPTIMIZER]]
        seeds = len(best[BY_SEED]) if BY_SEED in rows else 0
        p_values = [separated(best[BY_SEED], r[BY_SEED]) for _, r in rivals.iterrows()] if BY_SEED in rows else []
        if not p_values or not all(effects.holm(p_values, SOONEST_ALPHA)):
            close = [r["optimiser"] for (_, r), p in zip(rivals.iterrows(), p_values) if p > SOONEST_ALPHA / len(p_values)]
            lines.append(
                f"- {mechanism}: the soonest median within ε is {best['optimiser']}'s, {best['evaluations_to_eps']:.0f} "
                f"evaluations, but a sign test over {seeds} matched seeds does not separate it from "
                f"{', '.join(close) or 'every other'} (α {SOONEST_ALPHA:g}, Holm): no winner named."
            )
            continue
        tied = best["optimiser"]
        line = f"- {mechanism}: soonest within ε, {tied} at {best['evaluations_to_eps']:.0f} evaluations"
        es = rows[rows[OPTIMIZER] == "es"]
        if "ES" not in tied.split(" and ") and not es.empty:
            es_steps = es["evaluations_to_eps"].iloc[0]
            line += (
                f", against the ES's {es_steps:.0f}: {es_steps - best['evaluations_to_eps']:.0f} fewer farm trainings"
                if np.isfinite(es_steps)
                else f"; the ES's median run did not get there in {int(es['evaluations'].iloc[0])}"
            )
        lines.append(line + f" (medians over seeds; a sign test over {seeds} matched seeds separates it from every "
                            f"other, α {SOONEST_ALPHA:g}, Holm).")
    return lines + ([""] if lines else [])


def _to_eps(row) -> str:
    seeds = f"{row.seeds_within_eps} of {row.seeds} seeds within ε"
    if np.isnan(row.evaluations_to_eps):
        return f"median not reached ({seeds})"
    spread = "" if np.isnan(row.evaluations_to_eps_max) else f"; {row.evaluations_to_eps_min:.0f}–{row.evaluations_to_eps_max:.0f}"
    return f"{row.evaluations_to_eps:.0f}{spread} ({seeds})"


def _compute(s: Summary) -> pd.DataFrame | None:
    """optimizers.csv's table, for a study that compares optimisers and scans its rules; None otherwise."""
    if not shown_here(s.design):
        return None
    return optimizer_table(s.trials, incumbent_table(s.generations, s.scans), epsilon(s.design, s.scans))


def _shown(s: Summary) -> bool:
    return s.optimizers is not None and not s.optimizers.empty


SECTION = Section(
    "optimizers", compute=_compute,
    markdown=lambda s: render(s.optimizers, table_epsilon(s.optimizers)) if _shown(s) else [],
    short=lambda s: soonest(s.optimizers) if _shown(s) else [],
    tables=lambda s: {OPTIMIZERS_CSV: csv_table(s.optimizers)} if s.optimizers is not None else {},
)  # fmt: skip
