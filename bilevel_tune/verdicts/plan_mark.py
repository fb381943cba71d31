"""Confirmatory or exploratory: was a run's decision plan fixed before its first look, and kept (docs/verdicts.md)?

The decision plan is everything that decides a row: the test, the family of rows, α, the margin, the seeds per
stage and at most, the final seeds, the score, the budget (generations per population). A fresh run writes it
and its fingerprint (a hash of its canonical JSON) into study.json before look 1 (`PLAN_KEY`), and each look's
entry in the stage log carries the fingerprint it was decided under.

A run is **confirmatory** when nothing in its record says the plan changed after a look; otherwise its answers are
**exploratory**, with "the plan changed after look K: …" naming what changed. What counts as a change, from the
record alone (so a folder written before fingerprints is judged too):

* a plan extension (`--extend-plan`: study.json's `plan_extensions`), after the stage it names;
* a margin declared on a running plan (`--declare-margin`), after the look before the one it decides from;
* a look decided under another test or family than the run's last (its stage entry, or a superseded one: a look
  re-decided under the new plan), or under another fingerprint;
* a recorded plan that differs from the run's plan now.

A look recorded without its test predates the paired test (its stage entries gained `test` with it), so AdaStop
decided it. Fresh seeds — none an earlier run of the question used — are the other half of confirmatory; the
tool cannot see them, the study file's comments say where its seeds came from.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping

from bilevel_tune.verdicts.decide import hypotheses_of
from bilevel_tune.verdicts.looks import ADASTOP, TEST_NAMES

PLAN_KEY = "decision_plan"  # study.json: the plan as fixed before look 1, its fingerprint, when
LEGACY_TEST = ADASTOP  # a look recorded without its test: decided before the paired test existed


def decision_plan(design) -> dict[str, Any]:
    """The plan that decides the study's rows, as plain data."""
    d = design.decide
    return {
        "test": d.test,
        "family": [h.key for h in hypotheses_of(design)],
        "alpha": d.alpha,
        "margin": d.margin,
        "seeds_per_stage": d.seeds_per_stage,
        "max_seeds": d.max_seeds,
        "final_seeds": design.budget.final_eval_seeds,
        "score": design.decide.score,
        "generations": {str(p): g for p, g in sorted({(c.population, c.generations) for c in design.cells})},
    }


def fingerprint(plan: Mapping[str, Any]) -> str:
    return hashlib.sha256(json.dumps(plan, sort_keys=True, default=str).encode()).hexdigest()[:16]


def plan_entry(design, utc: str, commit: str | None) -> dict[str, Any]:
    """study.json's `decision_plan`: the plan, its fingerprint, when and at which commit it was fixed."""
    plan = decision_plan(design)
    return {"fingerprint": fingerprint(plan), "plan": plan, "fixed_utc": utc, "git_sha": commit}


@dataclass(frozen=True)
class PlanMark:
    confirmatory: bool
    after_look: int | None  # the first look after which the plan changed (None: it never did)
    changes: tuple[str, ...]  # what changed, in words
    fingerprint: str | None  # the plan fixed before look 1 (None: the run predates fingerprints)

    def sentence(self) -> str:
        if self.confirmatory:
            fixed = (
                f"its decision plan (fingerprint {self.fingerprint}) was fixed before look 1 and never changed"
                if self.fingerprint else "no change to its decision plan is recorded after any look"
            )
            return f"**Confirmatory**: {fixed}."
        return f"**Exploratory**: the plan changed after look {self.after_look}: {'; '.join(self.changes)}."

    def record(self) -> dict[str, Any]:
        return {
            "confirmatory": self.confirmatory, "plan_changed_after_look": self.after_look,
            "plan_changes": list(self.changes), "plan_fingerprint": self.fingerprint,
        }  # fmt: skip


def mark(design, record: Mapping[str, Any]) -> PlanMark:
    """The run's mark from its study.json (`record`) and its study as it stands."""
    now = decision_plan(design)
    found: list[tuple[str, int, str]] = []  # (what kind, a look decided without the change, the change in words)
    for ext in record.get("plan_extensions", []) or []:
        words = f"max seeds {ext['from_max_seeds']} → {ext['to_max_seeds']} (--extend-plan)"
        found.append(("max_seeds", int(ext["after_stage"]), words))
    margin_from = design.decide.margin_from or 1
    if design.decide.margin is not None and margin_from > 1:
        found.append(("margin", margin_from - 1, f"margin {design.decide.margin:g} declared before look {margin_from}"))
    for stage in record.get("stages", []) or []:
        for look in [*stage.get("superseded", []), stage]:
            if not look.get("decisions"):
                continue
            k = int(look.get("looks") or stage["stage"])
            test = look.get("test", LEGACY_TEST)
            if test != now["test"]:
                found.append(("test", k, f"test {TEST_NAMES.get(test, test)} → {TEST_NAMES.get(now['test'], now['test'])}"))
            rows = [d["comparison"] for d in look["decisions"]]
            if sorted(rows) != sorted(now["family"]):
                found.append(("family", k, f"family {len(rows)} → {len(now['family'])} rows"))
    fixed = record.get(PLAN_KEY)
    if fixed:
        explained = {"family"} | ({"max_seeds"} if record.get("plan_extensions") else set()) | (
            {"margin"} if margin_from > 1 else set())  # fmt: skip  # said above, in the words of their flags
        for key in sorted(set(fixed["plan"]) | set(now)):
            if fixed["plan"].get(key) != now.get(key) and key not in explained:
                words = f"{key} {fixed['plan'].get(key)} → {now.get(key)}"
                found.append((key, _looks_under(record, fixed["fingerprint"]), words))
    if not found:
        return PlanMark(True, None, (), fixed["fingerprint"] if fixed else None)
    last_under_old: dict[str, tuple[int, str]] = {}  # a change came after the last look decided without it
    for kind, k, words in found:
        if k >= last_under_old.get(kind, (-1, ""))[0]:
            last_under_old[kind] = (k, words)
    changes = tuple(words for k, words in sorted(last_under_old.values()))
    after = min(k for k, _ in last_under_old.values())
    return PlanMark(False, after, changes, fixed["fingerprint"] if fixed else None)


def _looks_under(record: Mapping[str, Any], fixed: str) -> int:
    """The looks decided under the fixed plan's fingerprint before one was decided under another."""
    looks = 0
    for stage in record.get("stages", []) or []:
        if stage.get("decisions") and stage.get("plan_fingerprint", fixed) == fixed:
            looks = int(stage.get("looks") or stage["stage"])
        elif stage.get("decisions"):
            break
    return looks
