"""Held-out learners: inner loops that score each run's final rules and the status quo, beside the run's own loop.

`[final] learners` in a study file, `--learners a,b` on the command line, or `--reevaluate RUN_DIR --learners a,b`
on a finished run (docs/verdicts.md). Each is an inner loop, named as `--inner` names one, with settings of its own:

    analytic                the world's myopic best response (a world without one is refused in one line)
    ppo                     RLlib PPO through RLlib's per-agent path, the study's network and budget
    frozen                  APPO trained under the status quo, then scored under the final rules without retraining
    appo, appo-multiagent   the study's APPO loops (with settings: `appo(appo.lr=3e-4, network.hidden=[64,64])`)
    package.module:Class    a user's loop

A learner's settings may set `appo.*`, `network.*` and `budget.inner_iters` (what the learner is, not what it is
scored on). The run's own loop always scores too, first (`own`): its re-evaluation of the status quo pairs with
its own of the final rules. Plain data: the loops run in `inner.heldout`.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

from bilevel_tune.base.knobs import StudyError, split_top
from bilevel_tune.study_data.settings import plain

HELD_OUT = ("analytic", "ppo", "frozen", "appo", "appo-multiagent")
TUNABLE = ("appo.", "network.", "budget.inner_iters")  # what a learner's settings may change
SPEC = re.compile(r"^\s*(?P<loop>[\w.\-:]+)\s*(?:\((?P<args>.*)\))?\s*$")


@dataclass(frozen=True)
class Learner:
    """One learner: its label (how tables name it), its loop spec and its settings (the study's, changed)."""

    label: str
    loop: str
    settings: tuple[tuple[str, Any], ...] = ()
    own: bool = False  # the run's own loop

    def study(self, study):
        """The study as this learner runs it: its settings applied (the study's own where it sets none)."""
        if not self.settings:
            return study
        return study.with_overrides(settings=dict(self.settings))


def parse_learner(text: str, study) -> Learner:
    """A learner as written (`ppo`, `appo(appo.lr=3e-4)`); StudyError in one line naming what is wrong."""
    from bilevel_tune.inner import InnerLoopError, check_loop_spec

    match = SPEC.match(text)
    if not match:
        raise StudyError(f"learner {text!r} must look like a loop's name, with settings in parentheses: appo(appo.lr=3e-4)")
    loop, args = match["loop"], match["args"]
    if loop not in HELD_OUT and ":" not in loop:
        raise StudyError(f"learner {loop!r} is unknown; allowed: {', '.join(HELD_OUT)}, or package.module:Class")
    if ":" in loop:
        try:
            check_loop_spec(loop)
        except InnerLoopError as err:
            raise StudyError(f"learner {err}") from None
    settings = []
    for part in split_top(args) if args and args.strip() else []:
        key, sep, value = part.partition("=")
        key = study.table.rule_aliases.get(key.strip(), key.strip())
        if not sep or not key:
            raise StudyError(f"learner {text!r}: {part.strip()!r} must look like key=value, e.g. appo.lr=3e-4")
        if not key.startswith(TUNABLE):
            raise StudyError(
                f"learner {text!r}: {key} is what the learner is scored on, not what it is; a learner may set "
                "appo.*, network.* and budget.inner_iters"
            )
        spec = study.table.setting(key, f"learner {text!r}")
        typed = spec.parse(value.strip().strip("[]"), f"learner {text!r}")
        settings.append((spec.key, typed))
    label = loop + (f"({', '.join(f'{k}={plain(v)}' for k, v in settings)})" if settings else "")
    return Learner(label, loop, tuple(settings))


def held_out(study) -> list[Learner]:
    """The study's [final] learners, parsed."""
    return [parse_learner(text, study) for text in study.final.learners]


OWN = " (its own)"  # the run's own loop's label: its name and this


def own_learner(study) -> Learner:
    return Learner(f"{study.inner}{OWN}", study.inner, (), own=True)


def learners_of(study, extra=()) -> list[Learner]:
    """Every learner that scores a run's final rules: its own loop first, then the held-out ones."""
    return [own_learner(study), *held_out(study), *(parse_learner(t, study) for t in extra)]


def check_learners(study, extra=()) -> None:
    """The held-out learners parse, differ, and can run on the study's world; StudyError in one line otherwise."""
    from bilevel_tune.inner import InnerLoopError, check_loop_on_world

    found = learners_of(study, extra)[1:]
    labels = [learner.label for learner in found]
    repeated = sorted({label for label in labels if labels.count(label) > 1})
    if repeated:
        raise StudyError(f"learners: {repeated[0]!r} is named twice")
    for learner in found:
        if learner.loop in ("analytic",) or ":" in learner.loop:
            try:
                check_loop_on_world(learner.loop, study.world_kind)
            except InnerLoopError as err:
                raise StudyError(f"learner {learner.label}: {err}") from None


def with_learners(study, extra) -> Any:
    """The study with these learners added to its [final] learners (`--reevaluate`, a run's record kept)."""
    known = list(study.final.learners)
    merged = tuple([*known, *(t for t in extra if t not in known)])
    return dataclasses.replace(study, final=dataclasses.replace(study.final, learners=merged))
