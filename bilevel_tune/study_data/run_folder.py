"""The run folder's schema: its file names, the grid cell, trial names, and the per-trial record.

    results/<study>-<UTC time>/
      study.json                      STUDY_FILE: the resolved study, its CPU plan, provenance
      <trial>/generations.jsonl       GENERATIONS_FILE: one JSON line per generation, then a final line
      summary.md, trials.csv, ...     SUMMARY_FILES, and PLOTS_DIR/*.png
      tensorboard/<trial name>/       TENSORBOARD_DIR: each trial's curves, and summary/ (bilevel_tune.views.curves)

`generations.jsonl` is the authoritative record of a trial (Tune's own files
are a view). A retried trial may append a generation again; `read_records`
keeps the last line per generation, so readers see no gap and no duplicate.
Every key inside a record is named in `bilevel_tune.core.metrics`.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from bilevel_tune.core import metrics
from bilevel_tune.study_data.settings import plain, short_name

STUDY_FILE = "study.json"
GENERATIONS_FILE = "generations.jsonl"
SUMMARY_MARKDOWN = "summary.md"
TRIALS_CSV, CELLS_CSV, GRID_CSV = "trials.csv", "cells.csv", "grid.csv"
GENERATIONS_CSV = "generations.csv.gz"  # one row per ES trial and generation (a shipped folder's stand-in for the records)
ANSWERS_CSV, CEILING_CSV = "answers.csv", "ceiling.csv"  # the Answers' comparisons; the runs at the ceiling (if any)
HELDOUT_CSV = "heldout.csv"  # held-out learners' scores: per trial, learner and final seed (docs/verdicts.md)
REEVALUATIONS = "reevaluations"  # study.json's log of the held-out step's sessions
STAGES = "stages"  # study.json's log of the stages: seeds, trials, decisions
ROBUSTNESS_CSV = "robustness.csv"  # the Robustness section's decided answers
OPTIMIZERS_CSV = "optimizers.csv"  # per optimiser and mechanism: evaluations to ε of the scan's best, regret, its own seconds
VERDICTS_FILE = "verdicts.json"
PILOT_FILE = "pilot.json"  # the pilot's answers, which the summary's "Against its pilot" compares with (report.against)
SUMMARY_FILES = (SUMMARY_MARKDOWN, ANSWERS_CSV, TRIALS_CSV, CELLS_CSV, GRID_CSV, VERDICTS_FILE)
PLOTS_DIR = "plots"
TENSORBOARD_DIR = "tensorboard"  # <trial name>/ and summary/: TensorBoard's runs (bilevel_tune.views.curves)

KIND_GENERATION = "generation"  # values of the record key metrics.KIND
KIND_FINAL = "final"
SCAN = "scan"  # the value of metrics.TRIAL_KIND on a scan trial; also the first element of its cell key
SCAN_CSV = "scan.csv"  # one row per scan, grid point: rules, objective, its terms, upper bound, final re-evaluation


@dataclass(frozen=True)
class Cell:
    """One trial: an ES run (population × searched rules × seed) or a scan of the searched rules (× seed).

    An ES trial's `generations` is its ES budget; a scan trial's `population` is its grid
    points and its `generations` its passes (bilevel_tune.core.scan).
    """

    population: int
    optimize_params: tuple[str, ...]
    seed: int
    generations: int
    scan: bool = False
    extra: tuple[tuple[str, Any], ...] = ()  # the further grid axes' values, (setting key, value) sorted by key

    @property
    def dims(self) -> int:
        return len(self.optimize_params)

    @property
    def key(self) -> tuple:
        """What identifies a trial (its budget does not): (population or "scan", params, seed, further axes)."""
        return (SCAN if self.scan else self.population, self.optimize_params, self.seed, self.extra)

    @property
    def group(self) -> tuple:
        """Its key less the seed: the cells that are one arm of a comparison, (population, params, further axes)."""
        return group_of(self.key)

    def as_config(self) -> dict[str, Any]:
        """The Tune trial config of this cell, also the cell fields of its records (further axes by setting key)."""
        config = {metrics.POPULATION: self.population, metrics.OPTIMIZE_PARAMS: list(self.optimize_params), metrics.SEED: self.seed}
        config.update({key: list(value) if isinstance(value, tuple) else value for key, value in self.extra})
        return {metrics.TRIAL_KIND: SCAN, **config} if self.scan else config

    @staticmethod
    def key_of(config: Mapping[str, Any]) -> tuple:
        """The cell key of a Tune trial config (this release's plan, the cell alone of runs before it, or the flat one of
        runs before 0.2), of a plan, or of a record."""
        config = config.get(metrics.TRIAL, config)
        config = config.get(metrics.CELL, config)
        first = SCAN if config.get(metrics.TRIAL_KIND) == SCAN else int(config[metrics.POPULATION])
        extra = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in config.items() if "." in k))
        return (first, tuple(config[metrics.OPTIMIZE_PARAMS]), int(config[metrics.SEED]), extra)


def group_of(key: tuple) -> tuple:
    """A cell key's group: the key less its seed."""
    return (key[0], key[1], key[3])


# A group's runs read at fewer evaluations than they ran ([decide] equal_budget): the group (or cell key) with this
# entry added to its further axes' values — a key no setting has (settings' keys are section.name), so no real
# group is ever one of these.
AT_EVALUATIONS = "at evaluations"


def at_evaluations(group: tuple, evaluations: int) -> tuple:
    """The group read at `evaluations`: its runs' incumbents after that many evaluations."""
    population, params, extra = group
    return (population, params, extra + ((AT_EVALUATIONS, int(evaluations)),))


def key_at_evaluations(key: tuple, evaluations: int) -> tuple:
    """A cell key read at `evaluations` (`at_evaluations` of its group, with its seed)."""
    population, params, seed, extra = key
    return (population, params, seed, extra + ((AT_EVALUATIONS, int(evaluations)),))


def real_group(group: tuple) -> tuple:
    """The grid's group a group read at some evaluations is one of (itself for a grid group)."""
    population, params, extra = group
    return (population, params, tuple((k, v) for k, v in extra if k != AT_EVALUATIONS))


@dataclass(frozen=True)
class Stage:
    """Seeds added to a study after its grid's, each to the cells of some groups (`Cell.group`): the comparisons
    still open after the stage before (bilevel_tune.report.decide)."""

    seeds: tuple[int, ...]
    groups: tuple[tuple, ...]

    def to_dict(self) -> dict[str, Any]:
        return json_safe({"seeds": self.seeds, "groups": [[p, params, extra] for p, params, extra in self.groups]})

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Stage":
        groups = tuple(
            (int(p), tuple(params), tuple((k, _frozen(v)) for k, v in extra)) for p, params, extra in data["groups"]
        )
        return cls(tuple(int(s) for s in data["seeds"]), groups)


def _frozen(value):
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


def is_scan(key: tuple) -> bool:
    return key[0] == SCAN


NAMED_BY_VALUE = ("outer.optimizer",)  # axes a trial name shows by their value alone: weekend_pop4_1d_seed42_cma


def trial_name(study, cell: Mapping[str, Any] | Cell) -> str:
    """Trial names carry study, cell (its mechanism, named by the study's world: `Study.mechanisms`), seed and
    further axes: weekend_pop16_2d_seed42, weekend_scan_2d_seed42, weekend_pop16_2d_seed42_sigma0.05,
    ceiling_pop16_2d-floor-risk_seed7. `study`: the `definition.Study`."""
    first, params, seed, extra = cell.key if isinstance(cell, Cell) else Cell.key_of(cell)
    kind = SCAN if first == SCAN else f"pop{first}"
    axes = "".join(
        f"_{value.rpartition(':')[2]}" if key in NAMED_BY_VALUE else f"_{short_name(key)}{plain(value, '-')}"
        for key, value in extra
    )  # a user's optimiser by its class's name
    return f"{study.name}_{kind}_{study.mechanisms.name(params)}_seed{seed}{axes}"


def trial_dirname(study, cell: Mapping[str, Any] | Cell, trial_id: str) -> str:
    return trial_folder_name(trial_name(study, cell), trial_id)


def trial_folder_name(name: str, trial_id: str) -> str:
    """A trial's folder: its name, then Tune's id (weekend_pop16_2d_seed42_7837d_00002)."""
    return f"{name}_{trial_id}"


def rules_text(rules: Mapping[str, float], names) -> str:
    """Rules as heldout.csv writes them, the named ones in order: "min_demand_frac=0.169285, fixed_quota=0.85"."""
    return ", ".join(f"{n}={rules[n]:.6g}" for n in names)


# -- the per-trial record --------------------------------------------------------
def json_safe(value):
    """JSON-safe: tuples to lists, numpy to Python, non-finite floats to None."""
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    if hasattr(value, "tolist"):
        return json_safe(value.tolist())
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def num(value) -> float:
    """A recorded number; JSON null (a NaN or a failure when written) reads as NaN."""
    return float("nan") if value is None else float(value)


def write_json(path: Path, data: Any, indent: int = 2) -> None:
    """Write JSON whole or not at all: a reader, or a study killed mid-write, never sees half a file."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(json_safe(data), indent=indent))
    tmp.replace(path)


def read_records(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(generations sorted and deduplicated — last write wins —, the final record or None)."""
    by_generation: dict[int, dict[str, Any]] = {}
    final = None
    if not Path(path).exists():
        return [], None
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:  # a line cut by a kill mid-write
                continue
            if record.get(metrics.KIND) == KIND_FINAL:
                final = record
            else:
                by_generation[int(record[metrics.GENERATION])] = record
    return [by_generation[g] for g in sorted(by_generation)], final


def trial_records(run_dir: Path) -> dict[str, tuple[list[dict[str, Any]], dict[str, Any] | None]]:
    """{trial folder name: (generations, final record)} for every trial folder with a record."""
    return {p.parent.name: read_records(p) for p in sorted(Path(run_dir).glob(f"*/{GENERATIONS_FILE}"))}


def git_sha(marked: bool = False) -> str | None:
    """The commit this code runs from (None outside a git checkout, as in an installed wheel): a session's, a
    summary's (its tool commit); `marked`: with a + where the package's code differs from that commit."""
    import subprocess

    package = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=package, capture_output=True, text=True, timeout=5)
        changed = marked and subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "."], cwd=package, timeout=5).returncode == 1
    except (OSError, subprocess.SubprocessError):
        return None
    return (sha.stdout.strip() + "+" * changed) or None


def read_study_file(run_dir: Path) -> dict[str, Any]:
    """The parsed study.json of a run folder (KeyError/ValueError/OSError when it is not one)."""
    return json.loads((Path(run_dir) / STUDY_FILE).read_text())


# -- locating runs under a results root -----------------------------------------------
class RunFolderError(ValueError):
    """A results root or run folder the study cannot use; one line for the user."""


def check_results_root(root: str | Path) -> Path:
    """The results root as an absolute path: a folder (or creatable as one) that this process can write."""
    text = str(root)
    if "://" in text:
        scheme = text.split("://", 1)[0]
        raise RunFolderError(
            f"--results {text}: storage URIs ({scheme}://) are not supported; give a folder path that every node mounts"
        )
    path = Path(text).expanduser().resolve()
    for parent in [path, *path.parents]:
        if parent.exists():
            if not parent.is_dir():
                raise RunFolderError(f"--results {path}: {parent} is a file, not a folder")
            if not os.access(parent, os.W_OK):
                raise RunFolderError(f"--results {path}: {parent} is not writable")
            break
    return path


def new_run_dir(root: Path, study_name: str, name: str | None, now_utc: str) -> Path:
    """root/<name>, or root/<study>-<UTC time>; never an existing folder."""
    if name is not None and (not name or "/" in name or name.startswith(".")):
        raise RunFolderError(f"--name {name!r} must be a plain folder name")
    run_dir = root / (name or f"{study_name}-{now_utc}")
    if run_dir.exists():
        raise RunFolderError(f"run folder {run_dir} exists; --resume continues it, or choose another --name")
    return run_dir


def _study_name_of(run_dir: Path) -> str | None:
    try:
        return read_study_file(run_dir)["study"]["name"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_run(root: Path, study_name: str, name: str | None) -> Path:
    """The run to resume: root/<name>, or the latest run of this study under root."""
    if name is not None:
        run_dir = root / name
        owner = _study_name_of(run_dir)
        if owner is None:
            raise RunFolderError(f"--resume: {run_dir} is not a study run folder (no readable {STUDY_FILE})")
        if owner != study_name:
            raise RunFolderError(f"--resume: run {name!r} belongs to study {owner!r}, not {study_name!r}")
        return run_dir
    runs = sorted(
        (d for d in root.glob(f"{study_name}-*") if _study_name_of(d) == study_name), key=lambda d: d.stat().st_mtime
    )
    if not runs:
        raise RunFolderError(f"--resume: no earlier run of study {study_name!r} under {root}")
    return runs[-1]
