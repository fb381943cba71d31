"""A study's hypotheses decided at a stated family-wise error rate, look by look over its stages (docs/verdicts.md).

The score is each trial's final re-evaluation (the best-so-far is biased
upward, more so for larger populations). A look is a stage of the study
(`study_data.stages`): stage 1 its grid's seeds, each later one
`seeds_per_stage` more in the groups of the hypotheses still open,
K = max_seeds / seeds_per_stage looks at most. A run whose grid does not fit
that plan (3 seeds with seeds_per_stage 2) is looked at once with all its
seeds.

Two tests, `[decide] test`:

* **paired** (the default): every cell runs the same seeds, and a seed fixes
  the worlds, initial weights and evaluation seasons of every cell that runs
  it, so each hypothesis is read within seed (`family`) and tested by the
  group-sequential paired t (`sequential`), its share of α passed on by the
  graphical procedure (`graph`) — main effects and interactions first, the
  simple comparisons behind them. A hypothesis rejected at an updated level
  may be rejected on any look so far (Maurer & Bretz 2013).
* **adastop**: AdaStop's unpaired permutation test on the simple comparisons
  (`adastop`), for groups whose runs do not share seeds.

Nothing is kept between looks: `decide` replays every look over the stored
scores, so a resumed run or a summary rebuilt later decides as the run did.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from bilevel_tune.verdicts import family, sequential
from bilevel_tune.verdicts.adastop import decide_adastop, describe_adastop_plan
from bilevel_tune.verdicts.looks import (  # noqa: F401 - the decisions' vocabulary, also read through this module
    A_BETTER,
    ADASTOP,
    B_BETTER,
    EQUIVALENT,
    NO_DIFFERENCE,
    OPEN,
    PAIRED,
    TEST_NAMES,
    TESTS,
    UNDECIDED,
    DecideError,
    Decision,
    Decisions,
    Replay,
    plan_of,
)


def hypotheses_of(design) -> tuple:
    """What the study decides, in the Answers' order (the paired test's family; AdaStop's simple comparisons)."""
    return family.family(design, factorial=design.decide.test == PAIRED).hypotheses


def decide(design, finals: Mapping[tuple, float], trial_names: Mapping[tuple, str] | None = None) -> Decisions:
    """Replay the study's looks over the final re-evaluations so far: each complete stage is one look.

    `finals`: the final re-evaluated objective of every finished ES trial, by cell key. A stage with a trial not
    finished is not looked at (`incomplete` says which); a finished trial without a score raises DecideError.
    """
    if design.decide.test == ADASTOP:
        return decide_adastop(design, finals, trial_names)
    return decide_paired(design, finals, trial_names)


def decide_paired(design, finals: Mapping[tuple, float], trial_names: Mapping[tuple, str] | None = None) -> Decisions:
    """The group-sequential paired t over the study's family, its α passed on along the family's graph.

    With a margin, each hypothesis makes two claims, 'differs' and 'equivalent within the margin', each a node of
    the graph (`Graph.with_equivalence`) from the look the margin was declared before (`margin_from`); the looks
    before it keep the decisions they made without it."""
    fam = family.family(design)
    n, looks_allowed = plan_of(design)
    alpha, margin = design.decide.alpha, design.decide.margin

    def decisions(rows: tuple, looks: int, incomplete: str | None) -> Decisions:
        return Decisions(rows, looks, looks_allowed, alpha, n, incomplete, PAIRED, margin, design.decide.margin_from)

    if not fam.hypotheses:
        return decisions((), 0, None)
    m = len(fam.hypotheses)
    replay = Replay(design, finals, trial_names or {})
    graph = fam.graph
    claims = _Claims(fam, replay, n, looks_allowed, alpha, margin)
    followed = {j: 0 for j in range(m)}  # the last look each hypothesis has complete data for
    for stage in range(1, len(design.stages) + 2):
        if stage > looks_allowed or not replay.take(stage):
            break
        if margin is not None and stage == design.decide.margin_from:
            graph = claims.with_margin(graph, stage)
        for j, h in enumerate(fam.hypotheses):
            if followed[j] == stage - 1 and replay.seeds(h, stage) is not None:
                followed[j] = stage
        while (shown := claims.first_shown(graph, followed)) is not None:  # a claim shown passes its share on
            node, look, values = shown
            claims.shown[node] = (stage, n * look, float(values.mean()), graph.level(node, alpha))
            graph = graph.reject(node)
        if len(claims.shown) == len(graph.weights):
            break
    if not replay.looks:
        return decisions((), 0, replay.incomplete)
    out = []
    for j, h in enumerate(fam.hypotheses):
        differs, within = claims.shown.get(j), claims.shown.get(m + j)
        level = differs[3] if differs else graph.level(j, alpha)
        margin_level = (within[3] if within else graph.level(m + j, alpha)) if len(graph.weights) > m else 0.0
        margin_look, margin_seeds = (within[0], within[1]) if within else (0, 0)
        if differs is not None:
            stage, seeds, mean, _ = differs
            outcome = B_BETTER if mean > 0 else A_BETTER
            out.append(Decision(h, outcome, stage, seeds, level, within is not None, margin_level, margin_look, margin_seeds))
        elif within is not None:
            out.append(Decision(h, EQUIVALENT, margin_look, margin_seeds, level, True, margin_level, margin_look,
                                margin_seeds))  # fmt: skip
        else:
            still = followed[j] == replay.looks and replay.looks < looks_allowed
            outcome = OPEN if still else UNDECIDED
            out.append(Decision(h, outcome, replay.looks, n * followed[j], level, False, margin_level))
    return decisions(tuple(out), replay.looks, replay.incomplete)


@dataclass
class _Claims:
    """The claims a paired family can make and those shown so far: node j < m, hypothesis j differs; node m + j, it
    is equivalent within the margin (only once the margin applies)."""

    fam: family.Family
    replay: Replay
    n: int
    looks: int
    alpha: float
    margin: float | None
    shown: dict[int, tuple[int, int, float, float]] = field(default_factory=dict)  # node → (stage, seeds, mean, level)

    def with_margin(self, graph, stage: int):
        """The family's graph with the equivalence claims, from this look on: the claims shown at earlier looks
        rejected in their order, and what each hypothesis's 'differs' could have spent at those looks, at the share
        it held then, taken off its equivalence claim (the α of a look already taken is not spent twice)."""
        m = len(self.fam.hypotheses)
        split = self.fam.graph.with_equivalence()
        for node in sorted(self.shown, key=lambda k: self.shown[k][0]):
            split = split.reject(node)
        if stage > 1:
            for j in range(m):
                level = self.shown[j][3] if j in self.shown else graph.level(j, self.alpha)
                if level > 0:
                    spent = sequential.power(sequential.t_levels(self.n, self.looks, level), 0.0, by_look=stage - 1)
                    split = split.less(m + j, spent / self.alpha)
        return split

    def first_shown(self, graph, followed):
        """The first claim (in the family's order, 'differs' before 'equivalent') that one of its looks so far shows
        at its share now: (node, look, its within-seed values at that look); None when none does."""
        m = len(self.fam.hypotheses)
        for node in range(len(graph.weights)):
            j = node % m
            level = graph.level(node, self.alpha)
            if node in self.shown or level <= 0:
                continue
            h = self.fam.hypotheses[j]
            for look in range(1, followed[j] + 1):
                values = family.values(h, self.replay.scores, self.replay.seeds(h, look))
                if node < m:
                    if sequential.t_levels(self.n, self.looks, level).crosses(values, look):
                        return node, look, values
                elif sequential.t_levels(self.n, self.looks, 2 * level).within(values, look, self.margin):
                    return node, look, values
        return None


def gated_level(design, hypothesis) -> float:
    """The level a hypothesis that holds no share of α yet (a simple effect gated behind its main effect) is tested
    at once the hypotheses that gate it are shown: its share after theirs is passed on, in the graph its family
    decides in (with a margin, its 'differs' claim's); 0 where even then it gets none."""
    fam = family.family(design)
    graph = fam.graph.with_equivalence() if design.decide.margin is not None else fam.graph
    j = fam.index(hypothesis)
    parents = [k for k in range(len(fam.hypotheses)) if fam.graph.edges[k][j] > 0 and fam.graph.weights[k] > 0]
    for k in parents:
        graph = graph.reject(k)
    return graph.level(j, design.decide.alpha)


def within_seed(scores: Mapping[tuple, Mapping[int, float]], hypothesis) -> dict[int, float]:
    """A hypothesis's contrast at every seed all its groups hold: B − A for a comparison, the averaged contrast for a
    main effect or an interaction."""
    shared = set.intersection(*(set(scores.get(g, {})) for g in family.groups(hypothesis)))
    ordered = sorted(shared)
    return dict(zip(ordered, family.values(hypothesis, scores, ordered)))


def describe_plan(design) -> str:
    """The decision plan in one line: the test, its level, the hypotheses, the stages."""
    n, looks = plan_of(design)
    stages = f"{looks} stage(s) of {n} seeds" if looks > 1 else f"one look at the {n} seeds"
    if design.decide.test == ADASTOP:
        return describe_adastop_plan(design, n, looks, stages)
    hypotheses = family.family(design).hypotheses
    names = {family.MAIN: "main effect", family.INTERACTION: "interaction", family.SIMPLE: "simple comparison"}
    counts = [(names[kind], sum(h.kind == kind for h in hypotheses)) for kind in names]
    parts = ", ".join(f"{c} {name}{'s' if c != 1 else ''}" for name, c in counts if c)
    return (
        f"{TEST_NAMES[PAIRED]} (O'Brien–Fleming spending, graphical Holm) at family-wise α {design.decide.alpha:g} "
        f"over {len(hypotheses)} hypotheses ({parts}), {stages} at most"
    )


def describe(decisions: Decisions) -> list[str]:
    """What was decided after the stages looked at, one line per hypothesis."""
    open_ = sum(d.outcome == OPEN for d in decisions.decisions)
    undecided = sum(d.outcome == UNDECIDED for d in decisions.decisions)  # the plan's end: not decided, and never will be
    counts = f"{len(decisions.decisions) - open_ - undecided} decided" + (f", {undecided} undecided" if undecided else "")
    lines = [
        f"after stage {decisions.looks} of {decisions.stages} ({decisions.looks * decisions.seeds_per_look} seeds per "
        f"cell): {counts}, {open_} open ({decisions.test_name}, family-wise α {decisions.alpha:g})"
    ]
    for d in decisions.decisions:
        a, b = d.hypothesis.levels()
        winner = {A_BETTER: f" ({a})", B_BETTER: f" ({b})"}.get(d.outcome, "") if d.hypothesis.kind != family.INTERACTION else ""
        less = f", by less than {decisions.margin:g}" if d.within_margin and d.outcome != EQUIVALENT else ""
        within = f" within ±{decisions.margin:g}" if d.outcome == EQUIVALENT and decisions.margin is not None else ""
        lines.append(f"  {d.hypothesis.key}: {d.outcome}{winner}{less}{within}")
    return lines
