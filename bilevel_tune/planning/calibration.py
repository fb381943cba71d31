"""What a study's pieces cost on this machine: the inner loop measured now, the rest learned from past runs.

The plan's `CostModel` has two kinds of figures (docs/scaling.md):

* the inner loop's — a shard's start (process, imports, first build), a
  rebuild, the first and every later train() and one evaluation season of a
  block of n candidates — come from a *probe*: real shard actors, as many at
  once as the plan keeps CPUs busy (up to this machine's cores, so contention
  is in the figures), each running a few generations at the study's world and
  network settings in a Ray of the probe's own. A probe takes 10–25 s; its
  figures are cached per machine and settings.
* the study's own — launch (process and Ray start), per-trial overhead (Tune's
  trial actor, the trackers), per-generation report, finish (summary, Ray
  shutdown) — are measured by every real run on this machine and stored next
  to the probes; until one has run, the figures measured on the project's
  2-core reference machine stand in.

The store lives outside any results folder: $BILEVEL_CACHE_DIR, else
$XDG_CACHE_HOME/bilevel_tune, else ~/.cache/bilevel_tune.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from bilevel_tune.core import scan
from bilevel_tune.planning.plan import CostModel
from bilevel_tune.runtime.lifecycle import Scratch
from bilevel_tune.study_data.run_folder import write_json

STORE_FILE = "calibration.json"
PROBE_TIMEOUT_S = 120
# Measured on the project's 2-core reference machine by benchmarks/eta.py (`make study`'s command and its
# variants, a fresh store each, on a quiet machine: the median of 3 runs for appo offline, 2 for analytic
# offline, 1 each disabled; 2026-12-02, Ray 2.60), by W&B mode and inner loop: per trial the start of its
# actors — the shards' imports and first build, Tune's trial actor, W&B's logging actor and service — and
# their finish. Online is taken as offline.
_APPO_OFFLINE = {"launch_s": 11.3, "finish_s": 6.6, "trial_overhead_s": 22.3, "report_s": 0.20}
_ANALYTIC_OFFLINE = {"launch_s": 10.3, "finish_s": 6.0, "trial_overhead_s": 18.2, "report_s": 0.24}
REFERENCE_OVERHEADS = {
    ("offline", "appo"): _APPO_OFFLINE,
    ("online", "appo"): _APPO_OFFLINE,
    ("disabled", "appo"): {"launch_s": 11.0, "finish_s": 5.4, "trial_overhead_s": 11.1, "report_s": 0.023},
    ("offline", "analytic"): _ANALYTIC_OFFLINE,
    ("online", "analytic"): _ANALYTIC_OFFLINE,
    ("disabled", "analytic"): {"launch_s": 12.9, "finish_s": 5.3, "trial_overhead_s": 8.1, "report_s": 0.021},
}
OVERHEAD_KEYS = ("launch_s", "finish_s", "trial_overhead_s", "report_s")
OVERHEAD_HISTORY = 7  # runs kept per key: the ETA uses their median, not the last run's (one odd run moves it less)
# K of the probe's two generations per block size. Ten train() calls apart, not two: a block's per-candidate
# cost is a few ms per train(), lost in two calls' noise (a probe of K = 1 vs 3 fitted it at 0 and planned a
# population-16 weekend trial at 17 min; it ran 51. Ten calls apart: 0.055 + 0.008·n s, planned at 49 min).
PROBE_ITERS = (1, 11)
PROBE_LARGEST_BLOCK = scan.BLOCK  # the larger probed block: the study's largest population, or a scan's block
# A probe taken while other work holds the CPUs measures contention, not the loop (on the 2-core machine a
# ceiling probe beside a running study read train() 3× too slow and planned 46 h for a 4-h study). It is
# labelled busy, and the next probe on a quiet machine replaces it; the gap between the two thresholds
# keeps a 1-minute load average from flipping the verdict between two calls seconds apart.
BUSY_LOAD = 1.0  # 1-minute load average per CPU above which a probe is taken on a busy machine
QUIET_LOAD = 0.5  # ... and below which a busy probe is measured again
IN_PROCESS_LOOPS = ("analytic",)  # plain numpy: probed without Ray (its start is in the learned overheads)


def store_path() -> Path:
    base = os.environ.get("BILEVEL_CACHE_DIR")
    if base:
        return Path(base) / STORE_FILE
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "bilevel_tune" / STORE_FILE


def shown_store_path() -> str:
    """The store's path as a plan names it: under the home folder as ~/..., so a plan kept in a shipped
    study.json names no one machine's home."""
    path, home = store_path(), Path.home()
    return f"~/{path.relative_to(home)}" if path.is_relative_to(home) else str(path)


def _load_store() -> dict[str, Any]:
    try:
        return json.loads(store_path().read_text())
    except (OSError, ValueError):
        return {}


def _save_store(store: dict[str, Any]) -> None:
    path = store_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_json(path, store, indent=1)
    except OSError:  # a read-only home must not cost the study anything: the next dry run probes again
        pass


def machine() -> str:
    """This machine, as far as throughput goes."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{socket.gethostname()}|{cpu}|{os.cpu_count()} cores"


def _key(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    from bilevel_tune import __version__

    out = {"bilevel_tune": __version__}  # ours too: a new release's inner loop costs anew
    for name in ("ray", "torch", "numpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = ""
    return out


# -- the probe ------------------------------------------------------------------------
def probe_sizes(populations: Sequence[int], scans: bool = False) -> tuple[int, int]:
    """Two block sizes to fit train(n) = fixed + per_candidate · n: 1, and up to PROBE_LARGEST_BLOCK (a study
    that scans: that block, the one its scans run in)."""
    return 1, max(2, PROBE_LARGEST_BLOCK if scans else min(PROBE_LARGEST_BLOCK, max(populations)))


def run_probe(spec: str, config: dict[str, Any], sizes: Sequence[int], thread_cap: int, parallel: int) -> dict:
    """In this (fresh) process: `parallel` real shards, timed generation by generation.

    Each block size runs two generations, K = 1 and K = 11: the first train() of a
    fresh Algorithm does one-time work, so a tenth of the difference is one steady train().
    The difference is taken over the whole generation, evaluation included: APPO's
    learner updates in a thread of its own, and a short generation's updates are
    still queued when its evaluation drains them, so train() alone would miss
    them (a full-budget generation's 50 train() calls wait for them; measured: the
    ETA was 1.6× short when only train() was differenced).
    APPO and custom loops run as shard actors in a Ray of the probe's own;
    the analytic loop, plain numpy, runs in this process.
    """
    from bilevel_tune.inner import InnerLoopConfig, Shard
    from bilevel_tune.runtime.ray_init import cap_threads

    config = InnerLoopConfig.from_record(config)
    _rules = config.probe_rules  # n rule sets over the world's first searched rule
    if spec in IN_PROCESS_LOOPS:
        cap_threads(thread_cap)
        shard = Shard(spec, config)
        shards = [shard]

        def generation(n: int, seed: int, inner_iters: int):
            return [shard.generation(_rules(n), seed, 0, [seed], inner_iters)]

    else:
        import ray

        from bilevel_tune.runtime import ray_init

        scratch = tuple((k, os.environ[k]) for k in ("TMPDIR", "RAY_TMPDIR") if k in os.environ)  # the caller's
        ray_init.init(
            ray_init.RuntimeConfig(num_cpus=parallel, thread_cap=thread_cap, log_to_driver=False, extra_env=scratch)
        )
        shards = [ray.remote(Shard).options(num_cpus=1).remote(spec, config) for _ in range(parallel)]

        def generation(n: int, seed: int, inner_iters: int):
            return ray.get([a.generation.remote(_rules(n), seed, 0, [seed], inner_iters) for a in shards])

    generation(
        1, 0, 1
    )  # warm-up: the shard's process start, imports, first build (a trial's overhead, learned from runs)
    out: dict[str, Any] = {"sizes": {}}
    extra_iters = PROBE_ITERS[1] - PROBE_ITERS[0]
    for n in sizes:
        once, more = generation(n, 1, PROBE_ITERS[0]), generation(n, 2, PROBE_ITERS[1])
        total = lambda r: r.sec_train + r.sec_evaluate  # noqa: E731
        steady = [(total(b) - total(a)) / extra_iters for a, b in zip(once, more)]
        out["sizes"][str(n)] = {
            "train_s": _mean(steady),
            "first_train_extra_s": _mean([a.sec_train - s for a, s in zip(once, steady)]),
            "evaluate_s": _mean([r.sec_evaluate for r in once]),
            "rebuild_s": _mean([r.sec_reset for r in once + more]),
        }
    if spec not in IN_PROCESS_LOOPS:
        import ray

        ray.get([a.stop.remote() for a in shards])
        ray_init.shutdown()
    return out


class ProbeError(RuntimeError):
    """The probe gave no figures (it failed, or ran past its time); the message is one line."""


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def probe(spec: str, config: dict[str, Any], sizes: Sequence[int], thread_cap: int, parallel: int) -> dict[str, float]:
    """Run the probe in a fresh process; its figures fitted to the CostModel's shape."""
    if spec in IN_PROCESS_LOOPS:
        parallel = 1
    argv = [
        sys.executable,
        "-m",
        "bilevel_tune.planning.calibration",
        json.dumps([spec, config, list(sizes), thread_cap, parallel]),
    ]
    started = time.perf_counter()
    with Scratch():  # the probe's temporary files (torch's, Ray workers') go where they are removed
        try:
            done = subprocess.run(
                argv,
                capture_output=True,
                text=True,
                timeout=PROBE_TIMEOUT_S,
                env={**os.environ, "PYTHONWARNINGS": "ignore"},
            )
        except subprocess.TimeoutExpired:
            raise ProbeError(
                f"the calibration probe took over {PROBE_TIMEOUT_S} s (load {machine_load():.1f} per CPU); "
                "`--dry-run --recalibrate` on a quieter machine measures it"
            ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise ProbeError(f"the calibration probe failed: {last}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    (n_small, n_large), sizes_ = sizes, result["sizes"]
    small, large = sizes_[str(n_small)], sizes_[str(n_large)]

    def line(key: str) -> tuple[float, float]:
        slope = max((large[key] - small[key]) / (n_large - n_small), 0.0)
        return max(small[key] - slope * n_small, 0.0), slope

    train_fixed, train_per = line("train_s")
    eval_fixed, eval_per = line("evaluate_s")
    return {
        "rebuild_s": _mean([small["rebuild_s"], large["rebuild_s"]]),
        "first_train_extra_s": max(_mean([small["first_train_extra_s"], large["first_train_extra_s"]]), 0.0),
        "train_fixed_s": train_fixed,
        "train_per_candidate_s": train_per,
        "evaluate_fixed_s": eval_fixed,
        "evaluate_per_candidate_s": eval_per,
        "probe_wall_s": time.perf_counter() - started,
        "parallel": parallel,
    }


# -- what a run teaches ------------------------------------------------------------------
@dataclasses.dataclass
class RunClock:
    """Where a run's wall time went: what the next ETA on this machine learns from a complete fresh run."""

    process_start: float
    probing_s: float = 0.0
    fit_start: float = float("nan")
    fit_end: float = float("nan")
    trials: dict[str, float] | None = None  # per-trial overhead and per-generation report, when learnable

    @classmethod
    def now(cls) -> "RunClock":
        import psutil

        return cls(process_start=psutil.Process().create_time())

    def learned(self) -> dict[str, float] | None:
        """Launch (process start to Tune's start, probes aside), finish (Tune's end to now), and the trials' figures."""
        if self.trials is None:
            return None
        return {
            "launch_s": self.fit_start - self.process_start - self.probing_s,
            "finish_s": time.time() - self.fit_end,
            **self.trials,
        }


def trial_figures(
    plan, trials: Sequence[tuple[list[dict], dict | None, float]], fit_wall: float
) -> dict[str, float] | None:
    """Per-trial overhead and per-generation report time, as a complete run measured them.

    `trials`: each trial's records (generations, final) and its function's own time (Tune's
    time_total_s, exact). The overhead — the shards' start in generation 0, Tune's trial actor,
    the trackers — is what each trial must add for the plan's schedule to last as long as the
    fit did. None when a trial left no record.
    """
    from bilevel_tune.core import metrics
    from bilevel_tune.planning.plan import simulate
    from bilevel_tune.study_data.run_folder import Cell

    by_key, report_s = {}, []
    for rows, final, total in trials:
        if not rows:
            return None
        seconds = [r[metrics.SEC_PER_GEN] for r in rows]
        steady = float(np.median(seconds[1:] or seconds))
        report_s.append(max(total - sum(seconds) - float((final or {}).get(metrics.SEC_FINAL, 0.0)), 0.0) / len(rows))
        # generation 0 also starts the shards: that start belongs to the per-trial overhead
        by_key[Cell.key_of(rows[0])] = total - (seconds[0] - steady)
    shards = [t.cpus for t in plan.trials]  # a packed trial: its share of its pool's CPU
    inside = [by_key.get(t.cell.key, 0.0) for t in plan.trials]

    def makespan(overhead: float) -> float:
        seconds = [d + overhead for d in inside]
        return max(s + d for s, d in zip(simulate(seconds, shards, plan.cpus, None), seconds))

    low, high = 0.0, max(fit_wall, 1.0)
    for _ in range(40):  # bisection: makespan grows with the overhead
        mid = (low + high) / 2
        low, high = (mid, high) if makespan(mid) < fit_wall else (low, mid)
    return {"trial_overhead_s": low, "report_s": sum(report_s) / len(report_s)}


# -- the model a plan uses -------------------------------------------------------------
def inner_loop_figures(
    study, thread_cap: int, busy_cpus: int, refresh: bool = False, probe_if_missing: bool = True
) -> tuple[dict[str, float] | None, str]:
    """The inner loop's figures for this study's settings: cached, or probed now (and cached); None if not asked to."""
    from bilevel_tune.inner import InnerLoopConfig

    config = dataclasses.asdict(InnerLoopConfig.from_study(study))
    parallel = 1 if study.inner in IN_PROCESS_LOOPS else max(1, min(busy_cpus, os.cpu_count() or 1))
    sizes = probe_sizes(study.populations, scans=bool(study.scan))
    key = _key("probe", machine(), _versions(), study.inner, config, sizes, PROBE_ITERS, thread_cap, parallel)
    store = _load_store()
    cached = store.get("probes", {}).get(key)
    load = machine_load()
    stale = cached and cached.get("busy") and load < QUIET_LOAD  # the machine is quiet now: measure it quiet
    if cached and not refresh and not stale:
        return cached, f"cached probe of {cached['measured']} ({shown_store_path()}){_busy_note(cached)}"
    if not probe_if_missing:
        return None, "not calibrated on this machine for these settings yet (`--dry-run` calibrates)"
    try:
        figures = probe(study.inner, config, sizes, thread_cap, parallel)
    except ProbeError as err:  # no figures: the plan follows each trial's work alone, and says why
        return None, f"not calibrated: {err}"
    figures["measured"] = time.strftime("%Y-%m-%d %H:%M")
    figures["load"] = load
    figures["busy"] = load > BUSY_LOAD
    store.setdefault("probes", {})[key] = figures
    _save_store(store)
    how = f"probed now: {parallel} shard actor(s) at once, blocks of {' and '.join(map(str, sizes))} candidates"
    return figures, f"{how}, {figures['probe_wall_s']:.0f} s{_busy_note(figures)}"


def machine_load() -> float:
    """The 1-minute load average per CPU: how busy the machine is before a probe adds its own work."""
    return os.getloadavg()[0] / (os.cpu_count() or 1)


def _busy_note(figures: dict[str, Any]) -> str:
    if not figures.get("busy"):
        return ""
    return (
        f"; taken on a busy machine (load {figures['load']:.1f} per CPU): the ETA runs long, and the next "
        "dry run on a quiet machine measures again"
    )


def _overheads_key(wandb_mode: str, study) -> str:
    """Per machine, W&B mode, loop and its settings: a shard's start and first build grow with world and network."""
    from bilevel_tune.inner import InnerLoopConfig

    settings = dataclasses.asdict(InnerLoopConfig.from_study(study))
    return _key("overheads", machine(), wandb_mode, _loop_kind(study.inner), settings)


def overheads(wandb_mode: str, study) -> tuple[dict[str, float], str]:
    """The overheads on this machine: the median of its last real runs with these settings, else the reference figures."""
    runs = _history(_load_store().get("overheads", {}).get(_overheads_key(wandb_mode, study)))
    if runs:
        median = {k: float(np.median([r[k] for r in runs])) for k in OVERHEAD_KEYS}
        when = runs[-1]["measured"] if len(runs) == 1 else f"{len(runs)} runs, the last of {runs[-1]['measured']}"
        return median, f"overheads: the median of this machine's runs ({when})"
    kind = _loop_kind(study.inner) if _loop_kind(study.inner) != "custom" else "appo"  # a custom loop: the heavier
    return dict(REFERENCE_OVERHEADS[wandb_mode, kind]), "overheads of the 2-core reference machine"


def learn_overheads(wandb_mode: str, study, figures: dict[str, float]) -> None:
    """Store what a real run measured (OVERHEAD_KEYS), for the next dry run's ETA with the same settings."""
    store = _load_store()
    entry = {k: round(float(figures[k]), 3) for k in OVERHEAD_KEYS if k in figures}
    if len(entry) == len(OVERHEAD_KEYS):
        entry["measured"] = time.strftime("%Y-%m-%d %H:%M")
        learned = store.setdefault("overheads", {})
        key = _overheads_key(wandb_mode, study)
        learned[key] = {"runs": [*_history(learned.get(key)), entry][-OVERHEAD_HISTORY:]}
        _save_store(store)


def _history(stored: dict | None) -> list[dict[str, Any]]:
    """A key's learned runs, oldest first (a store written before the history held one run, flat)."""
    if not stored:
        return []
    return list(stored["runs"]) if "runs" in stored else [stored]


def _loop_kind(inner: str) -> str:
    """Which reference overheads fit a loop: both APPO loops start alike (RLlib's imports, a first build)."""
    if inner in ("appo", "appo-multiagent"):
        return "appo"
    return inner if inner == "analytic" else "custom"


def cost_model(
    study, wandb_mode: str, thread_cap: int, busy_cpus: int, refresh: bool = False, probe_if_missing: bool = True
) -> CostModel:
    """The plan's CostModel for this study on this machine; `source` says where each part came from.

    Without figures (and not asked to probe), shards follow each trial's work alone.
    """
    figures, how_inner = inner_loop_figures(study, thread_cap, busy_cpus, refresh, probe_if_missing)
    if figures is None:
        return CostModel.by_work(f"by work alone: {how_inner}")
    fixed, how_fixed = overheads(wandb_mode, study)
    fields = {f.name for f in dataclasses.fields(CostModel)}
    return CostModel(
        **{k: v for k, v in figures.items() if k in fields}, **fixed, source=f"inner loop: {how_inner}; {how_fixed}"
    )


if (
    __name__ == "__main__"
):  # a probe process: python -m bilevel_tune.planning.calibration '[spec, config, sizes, cap, n]'
    print(json.dumps(run_probe(*json.loads(sys.argv[1]))), flush=True)
