"""The summary's figures (PNG), drawn from its tables alone, so a run and its shipped folder draw the same.

Each figure is titled with its study, inner loop and budget, so it keeps where it came from on a slide.

* `best_so_far_evaluations`, `best_so_far_wall` — per mechanism, every population on one axis: the best objective
  so far against inner-loop evaluations (ES generations × population) and against wall-clock hours, the mean
  over seeds with a min–max band (a population of 16 spends 16 evaluations a generation, one of 1 spends one:
  against generations they cannot be compared);
* `final_pairs` — one panel per comparison (the Answers'): each run's final re-evaluation, matched seeds joined;
* `effects` — every comparison's B − A with its 95 % interval, the margin's band, and its pilot's where it has one;
* `ceiling` — where the study has a ceiling: each run's best against its upper bound, the fixed rules that set it;
* `objective_over_generations` — per trial, its own y range: the generation's mean ± SD, best, best so far;
* `es_population` — where the search went, physical units: each generation's best candidate and the search mean;
* `grid_heatmap` — the best objective per run;
* `landscape_<mechanism>` — with a rules scan: the scanned objective (colours from its 2nd–98th percentiles, so a
  plateau shows), the points at their upper bound, and every ES run of the same rules and seed on top.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import matplotlib.pyplot as plt  # headless machines fall back to Agg; notebooks keep their inline backend
import numpy as np
import pandas as pd

from bilevel_tune.core import metrics
from bilevel_tune.core.outer import label_of
from bilevel_tune.report import optimizers
from bilevel_tune.report.answers import by_group as answers_by_group
from bilevel_tune.report.ceiling import BOUND_TOL
from bilevel_tune.report.columns import BEST, GENERATION_BEST, MECHANISM, OPTIMIZER
from bilevel_tune.report.grids import grid_table
from bilevel_tune.report.section import Summary
from bilevel_tune.study_data.run_folder import PLOTS_DIR
from bilevel_tune.study_data.settings import is_setting_key, plain
from bilevel_tune.verdicts.family import SIMPLE
from bilevel_tune.verdicts.looks import A_BETTER, B_BETTER, EQUIVALENT

CEILING_PLOT = "ceiling"
LANDSCAPE = "landscape_{mechanism}"  # with a rules scan: one per mechanism (landscape_1d, landscape_2d-floor-risk)
COLOURS = plt.cm.tab10.colors


def title(s: Summary) -> str:
    """What every figure says of where it came from."""
    return f"study {s.design.name} · inner loop {s.design.inner} · budget {s.design.budget_label}"


def _finish(fig, s: Summary, what: str, legend_axes=None):
    """The figure's title (what, and where it came from), and one legend below its panels, off the data."""
    fig.suptitle(f"{what}\n{title(s)}", fontsize=10)
    height = fig.get_figheight()
    bottom = _legend_below(fig, legend_axes) / height if legend_axes is not None else 0.0
    fig.tight_layout(rect=(0, bottom, 1, 1))  # it leaves the suptitle its room
    return fig


def _panels(n: int, width: float = 4.0, height: float = 3.2, **kwargs):
    cols = min(max(n, 1), 4)
    rows = int(np.ceil(max(n, 1) / cols))
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows + 0.8), squeeze=False, **kwargs)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    return fig, axes


def _axes(table: pd.DataFrame) -> list[str]:
    return [c for c in table.columns if is_setting_key(c)]


def _mechanisms(table: pd.DataFrame) -> list[str]:
    """The mechanisms in order of dimensionality, then as the grid lists them."""
    if table.empty:
        return []
    order = table.assign(_dims=table["optimize_params"].str.count(",") + 1)
    return list(order.sort_values(["_dims"], kind="stable")[MECHANISM].unique())


def _panel_groups(table: pd.DataFrame) -> list[tuple[str, dict, pd.DataFrame]]:
    """(mechanism, the further axes' values, its rows), mechanisms in order."""
    axes, out = _axes(table), []
    for mechanism in _mechanisms(table):
        rows = table[table[MECHANISM] == mechanism]
        for values, group in rows.groupby(axes, sort=True) if axes else [((), rows)]:
            values = values if isinstance(values, tuple) else (values,)
            out.append((mechanism, dict(zip(axes, values)), group))
    return out


def _where(mechanism: str, fixed: dict) -> str:
    return mechanism + "".join(f", {k.split('.', 1)[-1]} {plain(v)}" for k, v in fixed.items())


def _legend_below(fig, axes) -> float:
    """One legend for the figure, under its panels; returns the inches it takes."""
    handles, labels = {}, []
    for ax in np.ravel(axes):
        for h, label in zip(*ax.get_legend_handles_labels()):
            if label not in handles:
                handles[label] = h
                labels.append(label)
    if not labels:
        return 0.0
    columns = min(len(labels), 3)
    fig.legend([handles[x] for x in labels], labels, loc="lower center", ncol=columns, fontsize=8, frameon=False)
    return 0.1 + 0.22 * int(np.ceil(len(labels) / columns))


def _ceiling_line(ax, ceiling: float | None) -> None:
    """The ceiling, where it lies within the panel's data: it never stretches a panel that does not reach it."""
    low, high = ax.get_ylim()
    if ceiling is not None and low <= ceiling <= high:
        ax.axhline(ceiling, color="r", lw=0.8, ls=":", label=f"ceiling {ceiling:g}")


# -- best so far against evaluations and wall clock -----------------------------------------------------------
def _band(runs: list[pd.DataFrame], x: str, grid: np.ndarray) -> np.ndarray:
    """Each run's best so far on a common x grid (a running maximum: its value at the last point ≤ x)."""
    out = np.full((len(runs), grid.size), np.nan)
    for i, run in enumerate(runs):
        run = run.sort_values(x)
        index = np.searchsorted(run[x].to_numpy(), grid, side="right") - 1
        values = run["best_so_far"].to_numpy()
        out[i] = np.where(index >= 0, values[np.clip(index, 0, None)], np.nan)
    return out


def plot_best_so_far(s: Summary, x: str = "evaluations"):
    """Best so far against inner-loop evaluations (x = "evaluations") or wall-clock hours (x = "elapsed_s")."""
    table = s.generations
    groups = _panel_groups(table)
    fig, axes = _panels(len(groups), width=4.6)
    if not groups:
        axes[0, 0].text(0.5, 0.5, "no generations recorded", ha="center")
    hours = x == "elapsed_s"
    for ax, (mechanism, fixed, rows) in zip(axes.flat, groups):
        for i, (population, cell) in enumerate(rows.groupby("population")):
            runs = [run for _, run in cell.groupby("seed")]
            top = max(run[x].max() for run in runs)
            grid = np.linspace(0, top, 400) if hours else np.unique(cell[x].to_numpy())
            band = _band(runs, x, grid)
            shown = grid / 3600 if hours else grid
            colour = COLOURS[i % len(COLOURS)]
            with warnings.catch_warnings():  # before a seed's first generation its column is empty
                warnings.simplefilter("ignore", RuntimeWarning)
                ax.plot(shown, np.nanmean(band, axis=0), color=colour, lw=1.3,
                        label=f"population {population} (mean of {len(runs)} seeds)")  # fmt: skip
                ax.fill_between(shown, np.nanmin(band, axis=0), np.nanmax(band, axis=0), color=colour, alpha=0.2,
                                lw=0, label=f"population {population}: seeds' min–max")  # fmt: skip
        _ceiling_line(ax, s.design.ceiling)
        ax.set_title(_where(mechanism, fixed), fontsize=9)
        if not hours:
            ax.set_xscale("log")  # population 1 spends one evaluation a generation, 16 sixteen
        ax.set_xlabel("wall clock, hours" if hours else "inner-loop evaluations (generations × population)")
        ax.set_ylabel("best objective so far")
    what = "wall clock" if hours else "inner-loop evaluations"
    return _finish(fig, s, f"Best objective so far against {what} (optimistic: the best of noisy evaluations)", axes)


# -- the optimisers at equal evaluations ------------------------------------------------------------------------
def plot_optimizers(s: Summary):
    """Per mechanism, one line per optimiser against inner-loop evaluations (mean over seeds, the seeds' min–max
    as a band): above, the best objective so far (optimistic); below, the incumbent's value on the rules scan's
    landscape (report/optimizers.py) as a regret against the landscape's best, ε dashed."""
    incumbents = optimizers.incumbent_table(s.generations, s.scans)
    mechanisms = _mechanisms(s.generations)
    fig, axes = plt.subplots(2, max(len(mechanisms), 1), figsize=(4.8 * max(len(mechanisms), 1), 7.0), squeeze=False)
    for column, mechanism in enumerate(mechanisms):
        for row, (table, value, label) in enumerate(
            ((s.generations, "best_so_far", "best objective so far (optimistic)"),
             (incumbents, "incumbent_regret", "incumbent's regret: the scan's best − its value there"))
        ):  # fmt: skip
            ax = axes[row, column]
            rows = table[table[MECHANISM] == mechanism] if not table.empty else table
            for i, (name, runs) in enumerate(rows.groupby(OPTIMIZER, sort=False) if not rows.empty else []):
                curves = runs.pivot_table(index="evaluations", columns="seed", values=value)
                colour = COLOURS[i % len(COLOURS)]
                shown = label_of(name)
                ax.plot(curves.index, curves.mean(axis=1), color=colour, lw=1.3, label=shown)
                ax.fill_between(curves.index, curves.min(axis=1), curves.max(axis=1), color=colour, alpha=0.15, lw=0)
            if row == 1 and not rows.empty:
                eps = optimizers.table_epsilon(s.optimizers)
                ax.axhline(eps, color="k", lw=0.8, ls="--", label=f"ε = {eps:g}: within it, the rules are as good")
            ax.set_title(f"{mechanism}: {label}", fontsize=9)
            ax.set_xlabel("inner-loop evaluations (farm trainings)")
    return _finish(fig, s, "The optimisers at equal evaluations (mean over seeds; band: the seeds' min–max)", axes)


# -- the final re-evaluations, matched pairs joined ------------------------------------------------------------------
def plot_final_pairs(s: Summary):
    rows = [r for r in s.answers.rows if r.hypothesis.kind == SIMPLE]  # two groups' runs each, matched by seed
    fig, axes = _panels(len(rows), width=3.4)
    if not rows:
        axes[0, 0].text(0.5, 0.5, "no comparison", ha="center")
    by_group = answers_by_group(s.store.look_scores(s.design.decide.score))
    for ax, answer in zip(axes.flat, rows):
        c = answer.hypothesis
        a, b = by_group.get(c.a, {}), by_group.get(c.b, {})
        for seed in sorted(set(a) & set(b)):  # matched on the seed: joined
            ax.plot([0, 1], [a[seed], b[seed]], color="0.6", lw=0.8, zorder=1)
        for x, side, colour in ((0, a, COLOURS[0]), (1, b, COLOURS[1])):
            ax.scatter([x] * len(side), list(side.values()), color=colour, s=18, zorder=2)
            if side:
                ax.hlines(np.mean(list(side.values())), x - 0.15, x + 0.15, color="k", lw=1.5, zorder=3)
        ax.set_xticks([0, 1], list(c.levels()), fontsize=8)
        ax.set_xlim(-0.4, 1.4)
        where = f"at {c.matched()}" if c.matched() else ""
        ax.set_title(f"{' vs '.join(reversed(c.levels()))} {where}\n{answer.short(s.answers.decisions)}, "
                     f"B − A {answer.effect.mean:+.4f}", fontsize=8)  # fmt: skip
        ax.set_ylabel("final re-evaluated objective")
    return _finish(fig, s, "Final re-evaluations per run, matched seeds joined (bar: the mean)")


# -- every comparison's effect, beside its pilot's ----------------------------------------------------------
def plot_effects(s: Summary):
    """Each Answers row's B − A with its 95 % interval, as the table has it (a row decided at an earlier look: that
    look's), against 0 and the margin's band; beside it, where the run has a pilot whose record keeps them, the
    pilot's (`against`). The figure a paper shows for a confirmatory run."""
    rows = list(s.answers.rows)
    fig, ax = plt.subplots(figsize=(10.0, 1.6 + 0.42 * max(len(rows), 1)))
    if not rows:
        ax.text(0.5, 0.5, "no comparison", ha="center")
        return _finish(fig, s, "Each comparison's effect")
    margin = s.answers.decisions.margin
    if margin:
        ax.axvspan(-margin, margin, color="0.92", lw=0, label=f"within ±{margin:g}, the margin")
    ax.axvline(0, color="0.4", lw=0.8)
    pilots = {r.comparison: r.pilot for r in s.against.rows} if s.against is not None else {}
    here = {A_BETTER: ("a difference decided here", COLOURS[1]), B_BETTER: ("a difference decided here", COLOURS[1]),
            EQUIVALENT: ("equivalence decided here", COLOURS[2])}  # fmt: skip
    for i, answer in enumerate(rows):
        e = answer.effect
        label, colour = here.get(answer.decision.decision, ("undecided here", "0.45"))
        if np.isfinite(e.low):
            ax.hlines(-i, e.low, e.high, color=colour, lw=2.2)
        ax.plot(e.mean, -i, "o", color=colour, ms=6, label=label)
        pilot = pilots.get(answer.hypothesis.key)
        if pilot is not None and pilot.effect is not None:
            if pilot.interval is not None:
                ax.hlines(-i - 0.3, *pilot.interval, color=COLOURS[0], lw=1.2)
            ax.plot(pilot.effect, -i - 0.3, "D", mfc="white", mec=COLOURS[0], ms=5, label=f"the pilot ({s.against.pilot})")
    ax.set_yticks([-i for i in range(len(rows))], [r.hypothesis.key for r in rows], fontsize=8)
    ax.set_ylim(-len(rows) + 0.4, 0.6)
    ax.xaxis.set_major_locator(plt.MaxNLocator(6))
    ax.set_xlabel("B − A, final re-evaluated objective (95 % interval)")
    _finish(fig, s, "Each comparison's effect", [[ax]])
    fig.subplots_adjust(top=1 - 0.75 / fig.get_figheight())  # the title's two lines, however many rows below
    return fig


# -- the ceiling -------------------------------------------------------------------------------------------
def plot_ceiling(s: Summary):
    """Each run's best objective against its upper bound (the best any action could earn): on the diagonal the rules
    cap it, below it the search stopped short; the fixed rules that set the bound are named beside."""
    done = s.trials[s.trials.get("generations", 0) > 0]
    fig, ax = plt.subplots(figsize=(6.4, 5.2))
    ceiling = s.design.ceiling
    for i, mechanism in enumerate(_mechanisms(done)):
        rows = done[done[MECHANISM] == mechanism]
        ax.scatter(rows[metrics.UPPER_BOUND], rows[BEST], s=28, color=COLOURS[i % len(COLOURS)], label=mechanism,
                   edgecolor="k", lw=0.4)  # fmt: skip
    values = pd.concat([done[metrics.UPPER_BOUND], done[BEST]]).dropna()
    if not values.empty:
        low, high = values.min(), values.max()
        pad = 0.05 * (high - low or 1.0)
        ax.plot([low - pad, high + pad], [low - pad, high + pad], color="0.4", lw=0.8, ls="--",
                label="best = upper bound (capped by the rules)")  # fmt: skip
    if ceiling is not None:
        ax.axhline(ceiling, color="r", lw=0.8, ls=":", label=f"ceiling {ceiling:g}")
    rows = s.ceiling.rows
    lifts: dict[str, list[float]] = {}
    for text in rows["fixed rules that set it"] if not rows.empty else []:
        for rule, value in re.findall(r"(\S+) \(bound up to ([-\d.]+)\)", str(text)):
            lifts.setdefault(rule, []).append(float(value))
    if lifts:
        named = [
            f"{rule}: the bound up to {min(v):.3f}–{max(v):.3f} over its range" for rule, v in sorted(lifts.items())
        ]
        ax.text(0.02, 0.98, f"the fixed rules that set the bound of the {len(rows)} runs at the ceiling:\n"
                + "\n".join(named), transform=ax.transAxes, va="top", fontsize=7,
                bbox={"facecolor": "w", "alpha": 0.8, "lw": 0})  # fmt: skip
    ax.set_xlabel("upper bound of the objective (the best any action could earn)")
    ax.set_ylabel("best objective (optimistic)")
    ax.legend(fontsize=7, loc="lower right")
    return _finish(fig, s, "Ceiling: each run's best against its upper bound")


# -- per trial: the objective and where the search went --------------------------------------------------------
def _trial_runs(s: Summary) -> list[tuple[str, pd.DataFrame]]:
    """Each ES trial's generations, panels ordered by mechanism, then population, further axes and seed."""
    table = s.generations
    if table.empty:
        return []
    order = {m: i for i, m in enumerate(_mechanisms(table))}
    keys = table.groupby("trial", sort=False).first().reset_index()
    keys = keys.assign(_m=keys[MECHANISM].map(order)).sort_values(["_m", "population", *_axes(table), "seed"])
    return [(name, table[table["trial"] == name]) for name in keys["trial"]]


def plot_objective(s: Summary):
    runs = _trial_runs(s)
    fig, axes = _panels(len(runs))
    for ax, (name, run) in zip(axes.flat, runs):
        x = run["generation"].to_numpy()
        mean, std = run["mean"].to_numpy(), run["std"].to_numpy()
        single = bool(np.nanmax(np.nan_to_num(std, nan=0.0)) == 0)  # one candidate: its mean is itself
        ax.plot(
            x,
            run["generation_best"],
            color="0.6",
            lw=0.6,
            label="generation's candidate" if single else "generation's best",
        )
        if not single:
            ax.plot(x, mean, color=COLOURS[0], lw=0.9, label="population mean")
            ax.fill_between(x, mean - std, mean + std, color=COLOURS[0], alpha=0.15, lw=0, label="mean ± SD")
        ax.plot(x, run["best_so_far"], color=COLOURS[1], lw=1.4, label="best so far")
        values = np.concatenate([run["best_so_far"], run["generation_best"], mean[np.isfinite(mean)]])
        values = values[np.isfinite(values)]
        if values.size:  # its own range: a few collapsed candidates do not flatten the rest
            low, high = np.percentile(values, [1, 100])
            pad = 0.05 * (high - low or abs(high) or 1.0)
            ax.set_ylim(low - pad, high + pad)
        _ceiling_line(ax, s.design.ceiling)
        ax.set_title(name.split("_", 1)[-1], fontsize=9)
        ax.set_xlabel("generation")
        ax.set_ylabel("objective")
    return _finish(fig, s, "Objective over generations, per trial", axes)


def plot_population(s: Summary):
    """Where the search went, physical units: 1-D each generation's best candidate against its objective and the
    final search mean; 2-D the rules' plane with the best candidates (coloured by objective) and the mean's path."""
    runs = _trial_runs(s)
    specs = s.design.rule_specs_by_name
    fig, axes = _panels(len(runs))
    for ax, (name, run) in zip(axes.flat, runs):
        params = run["optimize_params"].iloc[0].split(",")
        best = run[[GENERATION_BEST + p for p in params]].to_numpy()
        means = run[[metrics.MEAN_RULE + p for p in params]].to_numpy()
        if len(params) == 1:
            shown = ax.scatter(best[:, 0], run["generation_best"], c=run["generation"], cmap="viridis", s=6,
                               label="generation's best candidate")  # fmt: skip
            fig.colorbar(shown, ax=ax, label="generation")
            ax.axvline(means[-1, 0], color="k", lw=0.8, ls="--", label="final search mean")
            ax.set_xlabel(params[0])
            ax.set_ylabel("objective")
        else:
            objective = run["generation_best"].to_numpy()
            finite = objective[np.isfinite(objective)]
            norm = plt.Normalize(*(np.percentile(finite, [2, 98]) if finite.size else (0.0, 1.0)))
            shown = ax.scatter(best[:, 0], best[:, 1], c=objective, cmap="viridis", norm=norm, s=6,
                               label="generation's best candidate")  # fmt: skip
            fig.colorbar(shown, ax=ax, label="objective")
            ax.plot(means[:, 0], means[:, 1], color="k", lw=0.9, label="search mean's path")
            ax.plot(*means[-1, :2], "k*", ms=8)
            ax.set_xlabel(params[0])
            ax.set_ylabel(params[1])
            ax.set_ylim(specs[params[1]].low, specs[params[1]].high)
        ax.set_xlim(specs[params[0]].low, specs[params[0]].high)
        ax.set_title(name.split("_", 1)[-1], fontsize=9)
    return _finish(fig, s, "Where the search went (physical units)", axes)


def plot_grid(s: Summary, value: str = BEST):
    grid = grid_table(s.trials, value)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * max(len(grid.columns), 1), 1.6 + 0.5 * max(len(grid), 1)))
    if grid.empty:
        ax.text(0.5, 0.5, "no data", ha="center")
        return _finish(fig, s, value)
    axes = {c: grid.pop(c) for c in list(grid.columns) if is_setting_key(c)}  # further axes label rows
    labels = [
        f"pop {p}, seed {seed}" + "".join(f", {k.split('.', 1)[-1]} {axes[k].iloc[i]}" for k in axes)
        for i, (p, seed) in enumerate(zip(grid.pop("population"), grid.pop("seed")))
    ]
    values = grid.to_numpy(dtype=float)
    image = ax.imshow(values, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(grid.columns)), grid.columns)
    ax.set_yticks(range(len(grid)), labels)
    for (i, j), v in np.ndenumerate(values):
        ax.text(j, i, "–" if np.isnan(v) else f"{v:.4f}", ha="center", va="center", color="w", fontsize=8)
    fig.colorbar(image, ax=ax, label=value)
    return _finish(fig, s, f"{value} per run")


# -- the landscape -------------------------------------------------------------------------------------------
def plot_landscape(s: Summary, mechanism: str | int):
    """The scanned objective over one mechanism's searched rules (named as in `landscape_<name>`: 1d, 2d,
    2d-floor-risk; an integer is a dimensionality, all its mechanisms), with every ES run of the same rules
    and seed on top."""
    scans, specs = s.scans, s.design.rule_specs_by_name
    if not scans.empty:
        names = scans["optimize_params"].map(lambda p: s.design.mechanisms.name(p.split(",")))
        scans = scans[scans["dims"] == mechanism] if isinstance(mechanism, int) else scans[names == mechanism]
    dims = int(scans["dims"].iloc[0]) if not scans.empty else 1
    axes = _axes(scans)  # the inner loop's further axes a scan crosses
    groups = list(scans.groupby(["optimize_params", "seed", *axes], sort=False)) if not scans.empty else []
    fig, panels = _panels(len(groups), width=4.8, height=3.8)
    if not groups:
        panels[0, 0].text(0.5, 0.5, "no scan", ha="center")
        return _finish(fig, s, "Rules scan")
    generations = s.generations
    populations = sorted(generations["population"].unique()) if not generations.empty else []
    colour = {p: COLOURS[(i + 1) % len(COLOURS)] for i, p in enumerate(populations)}
    finite = scans["objective"][np.isfinite(scans["objective"])]
    # one colour scale for all panels, from its upper three quarters: a plateau near the top is not one flat
    # colour (the lowest quarter shares the scale's lowest colour, and the colour bar says so)
    norm = plt.Normalize(*(np.percentile(finite, [25, 100]) if finite.size else (0.0, 1.0)))
    for ax, (values, scan) in zip(panels.flat, groups):
        params, seed, fixed = tuple(values[0].split(",")), values[1], dict(zip(axes, values[2:]))
        if dims == 1:
            scan = scan.sort_values(params[0])
            x, y = scan[params[0]].to_numpy(), scan["objective"].to_numpy()
            ax.plot(x, y, color="k", lw=1.2, label="objective (scan)")
            bound = scan[metrics.UPPER_BOUND].to_numpy()
            if np.isfinite(bound).any() and np.nanmax(bound - y) > BOUND_TOL:
                ax.plot(x, bound, color="0.5", lw=0.9, ls="--", label="upper bound")
            ax.set_ylabel("objective")
        else:
            side = int(round(np.sqrt(len(scan))))
            grid = scan.sort_values("point")["objective"].to_numpy().reshape(side, side).T  # rows: second rule
            extent = [specs[params[0]].low, specs[params[0]].high, specs[params[1]].low, specs[params[1]].high]
            shown = ax.imshow(grid, origin="lower", extent=extent, aspect="auto", cmap="viridis", norm=norm)
            fig.colorbar(shown, ax=ax, label="objective (scan)", extend="min")
            capped = scan[(scan[metrics.UPPER_BOUND] - scan["objective"]) <= BOUND_TOL]
            if len(capped):
                ax.scatter(capped[params[0]], capped[params[1]], marker="s", s=14, facecolor="none", edgecolor="r",
                           lw=0.8, label="scan point at its upper bound")  # fmt: skip
            ax.set_ylabel(params[1])
        runs = generations[(generations["optimize_params"] == values[0]) & (generations["seed"] == seed)]
        for key, value in fixed.items():  # another value of an axis the landscape itself depends on: not this one
            runs = runs[runs[key].astype(str) == str(value)]
        for _, run in runs.groupby("trial", sort=True):
            population = int(run["population"].iloc[0])
            c = colour[population]
            means = run[[metrics.MEAN_RULE + p for p in params]].to_numpy()
            best = run[[GENERATION_BEST + p for p in params]].to_numpy()
            who = f"pop {population}"
            if dims == 1:
                along = np.interp(means[:, 0], x, y)  # the mean's path, on the landscape
                ax.plot(means[:, 0], along, color=c, lw=0.9, alpha=0.8, label=f"{who}: search mean's path")
                ax.scatter(
                    best[:, 0], run["generation_best"], color=c, s=5, alpha=0.6, label=f"{who}: generation's best"
                )
                ax.plot(means[-1, 0], along[-1], "*", color=c, ms=9, mec="k", mew=0.5)
            else:
                ax.plot(means[:, 0], means[:, 1], color=c, lw=0.9, label=f"{who}: search mean's path")
                ax.scatter(best[:, 0], best[:, 1], color=c, s=5, alpha=0.6, label=f"{who}: generation's best")
                ax.plot(*means[-1, :2], "*", color=c, ms=9, mec="k", mew=0.5)
        ax.set_xlabel(params[0])
        ax.set_xlim(specs[params[0]].low, specs[params[0]].high)
        ax.set_title(f"{_where(scan[MECHANISM].iloc[0], fixed)} scan, seed {seed}", fontsize=9)
    what = "Rules scan: the objective over the searched rules, and every ES run on it"
    return _finish(fig, s, what + (" (colours: its upper three quarters)" if dims > 1 else ""), panels)


def landscape_names(summary: Summary) -> list[str]:
    """The scanned mechanisms, by name (1d, 2d, 2d-floor-risk), in order of dimensionality."""
    if summary.scans.empty:
        return []
    params = summary.scans.sort_values(["dims", "optimize_params"])["optimize_params"].unique()
    return [summary.design.mechanisms.name(p.split(",")) for p in params]


def drawings(s: Summary) -> dict[str, object]:
    """Every figure of this summary, by file name: how to draw it."""
    out = {
        "best_so_far_evaluations": lambda: plot_best_so_far(s, "evaluations"),
        "best_so_far_wall": lambda: plot_best_so_far(s, "elapsed_s"),
        "final_pairs": lambda: plot_final_pairs(s),
        "effects": lambda: plot_effects(s),
        "objective_over_generations": lambda: plot_objective(s),
        "es_population": lambda: plot_population(s),
        "grid_heatmap": lambda: plot_grid(s),
    }
    if s.design.ceiling is not None:
        out[CEILING_PLOT] = lambda: plot_ceiling(s)
    if s.optimizers is not None and not s.optimizers.empty:
        out["optimizers"] = lambda: plot_optimizers(s)
    for mechanism in landscape_names(s):
        out[LANDSCAPE.format(mechanism=mechanism)] = lambda m=mechanism: plot_landscape(s, m)
    return out


def write_plots(run_dir: Path, s: Summary) -> list[Path]:
    """Every figure of the summary into the run folder's plots/, each as it is named in `drawings`."""
    out = Path(run_dir) / PLOTS_DIR
    out.mkdir(exist_ok=True)
    written = []
    for name, draw in drawings(s).items():
        fig = draw()
        path = out / f"{name}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(path)
    return written
