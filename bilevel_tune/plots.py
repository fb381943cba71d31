"""Plots of a run folder (PNG): objective over generations, the ES population, the grid heatmap.

Everything is rebuilt from the run folder alone (study.json + generations.jsonl),
so the notebook and the study's end-of-run summary draw the same pictures.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt  # headless machines fall back to Agg; notebooks keep their inline backend
import numpy as np

from bilevel_tune import metrics as M
from bilevel_tune.summary import grid_table, load_run, num, trial_table

PLOTS_DIR = "plots"


def _label(gens: list[dict]) -> str:
    g = gens[0]
    return f"pop {g['population']}, {len(g['optimize_params'])}-D, seed {g['seed']}"


def _trials(run_dir: Path):
    study, trials = load_run(run_dir)
    return study, sorted(
        (t for t in trials if t["generations"]),
        key=lambda t: (
            t["generations"][0]["population"],
            len(t["generations"][0]["optimize_params"]),
            t["generations"][0]["seed"],
        ),
    )


def plot_objective(run_dir: Path):
    study, trials = _trials(run_dir)
    n = max(len(trials), 1)
    cols = min(n, 4)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False, sharey=True)
    for ax, t in zip(axes.flat, trials):
        gens = t["generations"]
        x = [g[M.GENERATION] for g in gens]
        for g in gens:
            objs = [o["objective"] for o in g["outcomes"] if o["objective"] is not None]
            ax.scatter([g[M.GENERATION]] * len(objs), objs, s=4, color="0.7", zorder=1)
        ax.plot(x, [num(g[M.OBJECTIVE_MEAN]) for g in gens], label="population mean", zorder=2)
        ax.plot(x, [num(g[M.BEST_OBJECTIVE]) for g in gens], label="best so far", zorder=3)
        ax.axhline(study.get("ceiling", 0.25), color="r", lw=0.8, ls=":", label="ceiling")
        ax.set_title(_label(gens), fontsize=9)
        ax.set_xlabel("generation")
    for ax in list(axes.flat)[len(trials) :]:
        ax.axis("off")
    axes[0, 0].set_ylabel("objective")
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_population(run_dir: Path):
    """Searched parameter(s) vs objective, coloured by generation; parallel coordinates in 2-D."""
    _, trials = _trials(run_dir)
    n = max(len(trials), 1)
    cols = min(n, 4)
    rows = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(4 * cols, 3 * rows), squeeze=False)
    for ax, t in zip(axes.flat, trials):
        gens = t["generations"]
        params = gens[0]["optimize_params"]
        last = max(g[M.GENERATION] for g in gens) or 1
        cmap = plt.get_cmap("viridis")
        for g in gens:
            u = np.atleast_2d(np.array(g["candidates"], dtype=float))
            objs = np.array([np.nan if o["objective"] is None else o["objective"] for o in g["outcomes"]], dtype=float)
            color = cmap(g[M.GENERATION] / last)
            if len(params) == 1:
                ax.scatter(u[:, 0], objs, s=5, color=color)
            else:  # parallel coordinates: each searched rule's u, then the objective rescaled to [0, 1]
                span = np.nanmax(objs) - np.nanmin(objs) if np.isfinite(objs).sum() > 1 else 1.0
                scaled = (objs - np.nanmin(objs)) / (span or 1.0)
                for row, s in zip(u, scaled):
                    ax.plot(range(len(params) + 1), [*row, s], color=color, lw=0.4, alpha=0.5)
        if len(params) == 1:
            ax.set_xlabel(f"{params[0]} (u)")
            ax.set_ylabel("objective")
        else:
            ax.set_xticks(range(len(params) + 1), [*params, "objective"], fontsize=7)
        ax.set_title(_label(gens), fontsize=9)
    for ax in list(axes.flat)[len(trials) :]:
        ax.axis("off")
    fig.tight_layout()
    return fig


def plot_grid(run_dir: Path, value: str = "best_objective"):
    study, trials = load_run(run_dir)
    grid = grid_table(trial_table(study, trials), value)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * max(len(grid.columns), 1), 1 + 0.5 * max(len(grid), 1)))
    if grid.empty:
        ax.text(0.5, 0.5, "no data", ha="center")
        return fig
    labels = [f"pop {p}, seed {s}" for p, s in zip(grid.pop("population"), grid.pop("seed"))]
    values = grid.to_numpy(dtype=float)
    image = ax.imshow(values, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(grid.columns)), grid.columns)
    ax.set_yticks(range(len(grid)), labels)
    for (i, j), v in np.ndenumerate(values):
        ax.text(j, i, "–" if np.isnan(v) else f"{v:.4f}", ha="center", va="center", color="w", fontsize=8)
    fig.colorbar(image, ax=ax, label=value)
    ax.set_title(f"{study['name']}: {value}")
    fig.tight_layout()
    return fig


def write_plots(run_dir: Path) -> list[Path]:
    out = Path(run_dir) / PLOTS_DIR
    out.mkdir(exist_ok=True)
    written = []
    for name, draw in (
        ("objective_over_generations", plot_objective),
        ("es_population", plot_population),
        ("grid_heatmap", plot_grid),
    ):
        fig = draw(Path(run_dir))
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
