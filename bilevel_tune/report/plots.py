"""Plots of a run folder (PNG): objective over generations, where the search went, the grid heatmap, the landscape.

Everything is drawn from the run folder alone (through `analysis`), so the
notebook and the study's end-of-run summary draw the same pictures. The
search is shown in the rules' physical units: in 1-D each candidate's rule
value against its objective; in 2-D the candidates in the plane of the two
searched rules, coloured by objective on one scale for all of a trial's
generations, with the search mean's path over the generations. With a
rules scan, the landscape per mechanism dimensionality (`landscape_1d`,
`landscape_2d`): the objective over the searched rules — a line in 1-D, a
heatmap on one colour scale in 2-D —, the upper bound where the rules cap
it, and every ES run of the same rules and seed drawn on top (its mean's
path, and each generation's best candidate), one colour per population.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt  # headless machines fall back to Agg; notebooks keep their inline backend
import numpy as np

from bilevel_tune.core import metrics as M
from bilevel_tune.report.analysis import BOUND_TOL, TrialRecords, grid_table, load_run
from bilevel_tune.report.run_summary import Summary, summarise
from bilevel_tune.study_data.run_folder import PLOTS_DIR, is_scan, num
from bilevel_tune.world.rules import mechanism_label, mechanism_name

PLOT_NAMES = ("objective_over_generations", "es_population", "grid_heatmap")
LANDSCAPE = (
    "landscape_{mechanism}"  # with a rules scan: one picture per mechanism (landscape_1d, landscape_2d-floor-risk)
)


def _label(key: tuple) -> str:
    population, params, seed, extra = key
    return f"pop {population}, {mechanism_label(params)}, seed {seed}{_axes_label(extra)}"


def _axes_label(extra) -> str:
    return "".join(f", {k.split('.', 1)[-1]} {v}" for k, v in extra)


def _trials(run_dir: Path) -> list[tuple[tuple, TrialRecords]]:
    _, trials = load_run(run_dir)
    return sorted(
        ((k, t) for k, t in trials.items() if t.generations and not is_scan(k)),
        key=lambda kt: (kt[0][0], len(kt[0][1]), kt[0][2], str(kt[0][3])),
    )


def _panels(n: int, **kwargs):
    cols = min(max(n, 1), 4)
    rows = int(np.ceil(max(n, 1) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3.2 * rows), squeeze=False, **kwargs)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    return fig, axes


def _objectives(row: dict) -> np.ndarray:
    return np.array([num(o[M.OBJECTIVE]) for o in row[M.OUTCOMES]])


def _physical(rule_spec, params, candidates) -> np.ndarray:
    """Candidates (u per searched rule) in the rules' physical units (`rule_spec`: the study's world's, by name)."""
    u = np.atleast_2d(np.array(candidates, dtype=float))
    return np.stack([[rule_spec(p).to_physical(x) for x in u[:, j]] for j, p in enumerate(params)], axis=1)


def plot_objective(run_dir: Path):
    study, _ = load_run(run_dir)
    trials = _trials(run_dir)
    fig, axes = _panels(len(trials), sharey=True)
    for ax, (key, t) in zip(axes.flat, trials):
        gens = t.generations
        x = [g[M.GENERATION] for g in gens]
        for g in gens:
            objs = _objectives(g)
            ax.scatter([g[M.GENERATION]] * len(objs), objs, s=4, color="0.7", zorder=1)
        ax.plot(x, [num(g[M.OBJECTIVE_MEAN]) for g in gens], label="population mean", zorder=2)
        ax.plot(x, [num(g[M.BEST_OBJECTIVE]) for g in gens], label="best so far", zorder=3)
        if study.ceiling is not None:
            ax.axhline(study.ceiling, color="r", lw=0.8, ls=":", label="ceiling")
        ax.set_title(_label(key), fontsize=9)
        ax.set_xlabel("generation")
    axes[0, 0].set_ylabel("objective")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_population(run_dir: Path):
    """Where the search went, in physical units: 1-D rule vs objective; 2-D the rules' plane and the mean's path."""
    rule_spec = load_run(run_dir)[0].rule_specs_by_name.__getitem__
    trials = _trials(run_dir)
    fig, axes = _panels(len(trials))
    for ax, (key, t) in zip(axes.flat, trials):
        params = key[1]
        gens = t.generations
        points = np.concatenate([_physical(rule_spec, params, g[M.CANDIDATES]) for g in gens])
        objs = np.concatenate([_objectives(g) for g in gens])
        if len(params) == 1:
            when = np.concatenate([[g[M.GENERATION]] * len(g[M.OUTCOMES]) for g in gens])
            shown = ax.scatter(points[:, 0], objs, c=when, cmap="viridis", s=6)
            fig.colorbar(shown, ax=ax, label="generation")
            ax.axvline(num(gens[-1][M.MEAN_RULE + params[0]]), color="k", lw=0.8, ls="--", label="final mean")
            ax.set_xlabel(params[0])
            ax.set_ylabel("objective")
        else:
            # one colour scale for all of the trial's generations, so early and late candidates compare
            finite = objs[np.isfinite(objs)]
            norm = plt.Normalize(*(np.percentile(finite, [2, 98]) if finite.size else (0.0, 1.0)))
            shown = ax.scatter(points[:, 0], points[:, 1], c=objs, cmap="viridis", norm=norm, s=6)
            fig.colorbar(shown, ax=ax, label="objective")
            path = np.array([[num(g[M.MEAN_RULE + p]) for p in params[:2]] for g in gens])
            ax.plot(path[:, 0], path[:, 1], color="k", lw=0.9, label="search mean")
            ax.plot(*path[-1], "k*", ms=8)
            ax.set_xlabel(params[0])
            ax.set_ylabel(params[1])
            for axis, p in ((ax.set_xlim, params[0]), (ax.set_ylim, params[1])):
                axis(rule_spec(p).low, rule_spec(p).high)
        ax.legend(fontsize=6, loc="best")
        ax.set_title(_label(key), fontsize=9)
    fig.tight_layout()
    return fig


def plot_grid(run_dir: Path, value: str = "best_objective", summary: Summary | None = None):
    s = summary or summarise(run_dir)
    grid = grid_table(s.trials, value)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * max(len(grid.columns), 1), 1 + 0.5 * max(len(grid), 1)))
    if grid.empty:
        ax.text(0.5, 0.5, "no data", ha="center")
        return fig
    axes = {c: grid.pop(c) for c in list(grid.columns) if c in s.study.table.by_key}  # further axes label rows
    labels = [
        f"pop {p}, seed {seed}" + "".join(f", {k.split('.', 1)[-1]} {axes[k][i]}" for k in axes)
        for i, (p, seed) in enumerate(zip(grid.pop("population"), grid.pop("seed")))
    ]
    values = grid.to_numpy(dtype=float)
    image = ax.imshow(values, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(grid.columns)), grid.columns)
    ax.set_yticks(range(len(grid)), labels)
    for (i, j), v in np.ndenumerate(values):
        ax.text(j, i, "–" if np.isnan(v) else f"{v:.4f}", ha="center", va="center", color="w", fontsize=8)
    fig.colorbar(image, ax=ax, label=value)
    ax.set_title(f"{s.study.name}: {value}")
    fig.tight_layout()
    return fig


def _es_path(rule_spec, params, trial: TrialRecords) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the search mean per generation, each generation's best candidate, its objective), physical units."""
    gens = trial.generations
    means = np.array([[num(g[M.MEAN_RULE + p]) for p in params] for g in gens])
    best, value = [], []
    for g in gens:
        objectives = _objectives(g)
        k = int(np.nanargmax(objectives)) if np.isfinite(objectives).any() else 0
        best.append(_physical(rule_spec, params, g[M.CANDIDATES])[k])
        value.append(objectives[k])
    return means, np.array(best), np.array(value)


def _cells_around(spec, points: int) -> tuple[float, float]:
    half = spec.span / (points - 1) / 2
    return spec.low - half, spec.high + half


def plot_landscape(run_dir: Path, mechanism: str | int, summary: Summary | None = None):
    """The scanned objective over one mechanism's searched rules (named as in `landscape_<name>`: 1d, 2d,
    2d-floor-risk; an integer is a dimensionality, all its mechanisms), with every ES run of the same rules
    and seed on top."""
    s = summary or summarise(run_dir)
    scans, rule_spec = s.scans, s.study.rule_specs_by_name.__getitem__
    if not scans.empty:
        names = scans["optimize_params"].map(lambda p: mechanism_name(p.split(",")))
        scans = scans[scans["dims"] == mechanism] if isinstance(mechanism, int) else scans[names == mechanism]
    dims = int(scans["dims"].iloc[0]) if not scans.empty else 1
    axes = [c for c in scans.columns if c in s.study.table.by_key]  # the inner loop's further axes a scan crosses
    groups = list(scans.groupby(["optimize_params", "seed", *axes], sort=False)) if not scans.empty else []
    fig, panels = _panels(len(groups))
    if not groups:
        panels[0, 0].text(0.5, 0.5, "no scan", ha="center")
        return fig
    _, trials = load_run(run_dir)
    populations = sorted({k[0] for k in trials if not is_scan(k)})
    colour = {p: plt.cm.tab10(i % 10) for i, p in enumerate(populations)}
    finite = scans["objective"][np.isfinite(scans["objective"])]
    norm = plt.Normalize(*(finite.agg(["min", "max"]) if finite.size else (0.0, 1.0)))  # one scale for all panels
    for ax, (values, scan) in zip(panels.flat, groups):
        params, seed, fixed = tuple(values[0].split(",")), values[1], dict(zip(axes, values[2:]))
        if dims == 1:
            scan = scan.sort_values(params[0])
            x, y = scan[params[0]].to_numpy(), scan["objective"].to_numpy()
            ax.plot(x, y, color="k", lw=1.2, label="objective (scan)")
            bound = scan[M.UPPER_BOUND].to_numpy()
            if np.nanmax(bound - y) > BOUND_TOL:
                ax.plot(x, bound, color="0.5", lw=0.9, ls="--", label="upper bound")
            ax.set_ylabel("objective")
        else:
            side = int(round(np.sqrt(len(scan))))
            values = scan.sort_values("point")["objective"].to_numpy().reshape(side, side).T  # rows: second rule
            extent = [
                rule_spec(params[0]).low,
                rule_spec(params[0]).high,
                rule_spec(params[1]).low,
                rule_spec(params[1]).high,
            ]
            shown = ax.imshow(values, origin="lower", extent=extent, aspect="auto", cmap="viridis", norm=norm)
            fig.colorbar(shown, ax=ax, label="objective (scan)")
            capped = scan[(scan[M.UPPER_BOUND] - scan["objective"]) <= BOUND_TOL]
            if len(capped):
                ax.scatter(
                    capped[params[0]],
                    capped[params[1]],
                    marker="+",
                    s=10,
                    color="w",
                    lw=0.6,
                    label="at its upper bound",
                )
            ax.set_ylabel(params[1])
        for key, trial in sorted(trials.items(), key=lambda kt: str(kt[0])):
            if is_scan(key) or key[1] != params or key[2] != seed or not trial.generations:
                continue
            extra = dict(key[3])
            if any(str(extra.get(k)) != str(v) for k, v in fixed.items()):
                continue  # another value of an axis the landscape itself depends on
            means, best, value = _es_path(rule_spec, params, trial)
            c = colour[key[0]]
            who = f"pop {key[0]}{_axes_label((k, v) for k, v in key[3] if k not in fixed)}"
            if dims == 1:
                along = np.interp(means[:, 0], x, y)  # the mean's path, on the landscape
                ax.plot(means[:, 0], along, color=c, lw=0.9, alpha=0.8, label=f"{who}: mean's path")
                ax.scatter(best[:, 0], value, color=c, s=5, alpha=0.6, label=f"{who}: best of generation")
                ax.plot(means[-1, 0], along[-1], "*", color=c, ms=9, mec="k", mew=0.5)
            else:
                ax.plot(means[:, 0], means[:, 1], color=c, lw=0.9, label=f"{who}: mean's path")
                ax.scatter(best[:, 0], best[:, 1], color=c, s=5, alpha=0.6, label=f"{who}: best of generation")
                ax.plot(*means[-1], "*", color=c, ms=9, mec="k", mew=0.5)
        ax.set_xlabel(params[0])
        ax.set_xlim(rule_spec(params[0]).low, rule_spec(params[0]).high)
        ax.set_title(f"{mechanism_label(params)} scan, seed {seed}{_axes_label(fixed.items())}", fontsize=9)
        ax.legend(fontsize=6, loc="lower left" if dims > 1 else "best", framealpha=0.7)
    fig.tight_layout()
    return fig


def landscape_names(summary: Summary) -> list[str]:
    """The scanned mechanisms, by name (1d, 2d, 2d-floor-risk), in order of dimensionality."""
    if summary.scans.empty:
        return []
    params = summary.scans.sort_values(["dims", "optimize_params"])["optimize_params"].unique()
    return [mechanism_name(p.split(",")) for p in params]


def write_plots(run_dir: Path, summary: Summary | None = None) -> list[Path]:
    summary = summary or summarise(run_dir)
    out = Path(run_dir) / PLOTS_DIR
    out.mkdir(exist_ok=True)
    written = []
    drawings = {
        PLOT_NAMES[0]: lambda: plot_objective(run_dir),
        PLOT_NAMES[1]: lambda: plot_population(run_dir),
        PLOT_NAMES[2]: lambda: plot_grid(run_dir, summary=summary),
    }
    for mechanism in landscape_names(summary):
        drawings[LANDSCAPE.format(mechanism=mechanism)] = lambda m=mechanism: plot_landscape(run_dir, m, summary)
    for name, draw in drawings.items():
        fig = draw()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
