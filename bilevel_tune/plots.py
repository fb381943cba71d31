"""Plots of a run folder (PNG): objective over generations, where the search went, the grid heatmap.

Everything is drawn from the run folder alone (through `analysis`), so the
notebook and the study's end-of-run summary draw the same pictures. The
search is shown in the rules' physical units: in 1-D each candidate's rule
value against its objective; in 2-D the candidates in the plane of the two
searched rules, coloured by objective on one scale for all of a trial's
generations, with the search mean's path over the generations.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt  # headless machines fall back to Agg; notebooks keep their inline backend
import numpy as np

from bilevel_tune import metrics as M
from bilevel_tune.analysis import Summary, TrialRecords, grid_table, load_run, num, summarise
from bilevel_tune.run_folder import PLOTS_DIR
from bilevel_tune.world.rules import rule_spec

PLOT_NAMES = ("objective_over_generations", "es_population", "grid_heatmap")


def _label(key: tuple) -> str:
    population, params, seed = key
    return f"pop {population}, {len(params)}-D, seed {seed}"


def _trials(run_dir: Path) -> list[tuple[tuple, TrialRecords]]:
    _, trials = load_run(run_dir)
    return sorted(
        ((k, t) for k, t in trials.items() if t.generations), key=lambda kt: (kt[0][0], len(kt[0][1]), kt[0][2])
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


def _physical(params, candidates) -> np.ndarray:
    """Candidates (u per searched rule) in the rules' physical units."""
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
        ax.axhline(study.ceiling, color="r", lw=0.8, ls=":", label="ceiling")
        ax.set_title(_label(key), fontsize=9)
        ax.set_xlabel("generation")
    axes[0, 0].set_ylabel("objective")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_population(run_dir: Path):
    """Where the search went, in physical units: 1-D rule vs objective; 2-D the rules' plane and the mean's path."""
    trials = _trials(run_dir)
    fig, axes = _panels(len(trials))
    for ax, (key, t) in zip(axes.flat, trials):
        params = key[1]
        gens = t.generations
        points = np.concatenate([_physical(params, g[M.CANDIDATES]) for g in gens])
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
    labels = [f"pop {p}, seed {seed}" for p, seed in zip(grid.pop("population"), grid.pop("seed"))]
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


def write_plots(run_dir: Path, summary: Summary | None = None) -> list[Path]:
    out = Path(run_dir) / PLOTS_DIR
    out.mkdir(exist_ok=True)
    written = []
    drawings = (
        lambda: plot_objective(run_dir),
        lambda: plot_population(run_dir),
        lambda: plot_grid(run_dir, summary=summary),
    )
    for name, draw in zip(PLOT_NAMES, drawings):
        fig = draw()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
