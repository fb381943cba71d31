"""study.json as a run's log across sessions: where the code came from, each session's options, plan, start and
end, and the declarations a resume made (a plan extended, a margin declared) — each before the look it governs.

    started = record_start(study, store, plan, options, mode)   # before Tune starts
    ...
    record_end(store, started, wall_s, exit_code, (finished, errored, interrupted))

Every entry is written through the run's store (`study_data.run_store`), under the run lock.

A run's total wall time across resumes (`cli.run_record`) is read from these entries.
"""

from __future__ import annotations

import datetime as dt
import os
import platform
from typing import Any

from bilevel_tune import __version__
from bilevel_tune.cli import staging
from bilevel_tune.cli.options import RunOptions, session_record
from bilevel_tune.planning.plan import Plan
from bilevel_tune.runtime import cluster
from bilevel_tune.study_data.definition import Study
from bilevel_tune.study_data.design import compile_design
from bilevel_tune.study_data.run_folder import git_sha
from bilevel_tune.study_data.run_store import MARGIN_DECLARATIONS, PLAN_EXTENSIONS, RunStore
from bilevel_tune.study_data.world_portrait import PORTRAIT_KEY
from bilevel_tune.verdicts import plan_mark


def provenance() -> dict[str, Any]:
    """Versions, git SHA and machine, read without importing the heavy packages."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {"bilevel_tune": __version__, "python": platform.python_version()}
    for package in ("ray", "torch", "numpy", "pandas", "wandb", "gymnasium"):
        try:
            versions[package] = version(package)
        except PackageNotFoundError:
            versions[package] = None
    return {
        "versions": versions,
        "git_sha": git_sha(),
        "cores": os.cpu_count(),
        "platform": platform.platform(),
        "started_utc": _now(),
    }


def numerics() -> dict[str, Any]:
    """What decides a float's last bits on this machine beside the code: the BLAS numpy runs (OpenBLAS picks its
    kernels by CPU: Haswell's and SkylakeX's sum in another order, so an ES's mean drifts by an ulp and a run
    diverges from one made on another host) and numpy's own SIMD extensions (AVX512's exp and log differ from
    AVX2's). Two sessions that agree here and run one commit compute the same numbers (benchmarks/numerics.py)."""
    import numpy as np
    from threadpoolctl import threadpool_info

    blas = [f"{i.get('internal_api')} {i.get('architecture')} {i.get('version')}" for i in threadpool_info()
            if i.get("user_api") == "blas"]  # fmt: skip
    try:  # numpy's own record of the targets it was built for and this CPU has (what np.show_runtime prints)
        from numpy._core._multiarray_umath import __cpu_baseline__, __cpu_dispatch__, __cpu_features__
    except ImportError:
        return {"blas": blas, "simd": None}
    simd = [name for name in (*__cpu_baseline__, *__cpu_dispatch__) if __cpu_features__.get(name)]
    return {"blas": blas, "simd": simd, "numpy": np.__version__}


def record_start(study: Study, store: RunStore, plan: Plan, options: RunOptions, mode: str) -> str:
    """study.json: the resolved study, provenance, the run's plan, its world's portrait, and this session's options
    and plan.

    The top-level plan is the first session's, made for the whole command: a resume plans only what is
    left, and keeps that plan in its own session entry. Returns this session's start, its key there.
    """
    planned = plan.to_dict(study)
    if not options.resume:  # the decision plan, fixed before look 1: a later change marks the answers exploratory
        store.create({
            "study": study.to_dict(), "provenance": provenance(),
            plan_mark.PLAN_KEY: plan_mark.plan_entry(compile_design(study), _now(), git_sha()),
        })  # fmt: skip
    else:
        _record_declarations(store, study)
    started = _now()
    session = {
        "started_utc": started,
        "resume": options.resume,
        **session_record(options),  # every session option as given
        "cpus": plan.cpus,
        "address": cluster.requested_address(options.address),  # None: a Ray of its own
        "wandb": mode,  # as resolved
        "git_sha": git_sha(),  # a resume may run a later commit than the first session's provenance
        "version": __version__,
        "numerics": numerics(),
        "plan": planned,
    }
    # the folder reads without its world's module; a folder from before keeps what it had
    store.begin_session(session, defaults={PORTRAIT_KEY: study.world_portrait(), "plan": planned})
    return started


def record_end(store: RunStore, started: str, wall_s: float, code: int, counts: tuple[int, int, int]) -> None:
    """The session that began at `started` ends: when, its wall time, exit status and trial counts."""
    ended = dict(ended_utc=_now(), wall_s=round(wall_s, 1), exit_code=code)
    store.end_session(started, **ended, **dict(zip(("finished", "errored", "interrupted"), counts)))


def _record_declarations(store: RunStore, study: Study) -> None:
    """What this resume declares against the recorded study: a longer plan (--extend-plan), a margin
    (--declare-margin), each logged with when it was made; the recorded study becomes the resumed one."""
    # both read before either is written: one resume may extend the plan and declare the margin at once
    recorded, declared = (store.record["study"].get("decide", {}).get(key) for key in ("max_seeds", "margin"))
    if recorded is not None and recorded != study.decide.max_seeds:
        store.declare(PLAN_EXTENSIONS, {
            "from_max_seeds": recorded,
            "to_max_seeds": study.decide.max_seeds,
            "after_stage": len(study.stages) + 1,
            "utc": _now(),
            "note": "declared before the next look; every look is replayed under the new plan",
        }, study.to_dict())  # fmt: skip
    if declared != study.decide.margin:
        store.declare(MARGIN_DECLARATIONS, {
            "margin": study.decide.margin,
            "from_look": study.decide.margin_from,
            "utc": _now(),
            "git_sha": git_sha(),
            "note": "declared before the look it decides from; the looks already taken keep their answers",
        }, study.to_dict(), staging.begun(store, study))  # fmt: skip


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()
