"""A study in stages under real Tune (`--until-decided`): a run made without stages continued, a stage stopped by
Ctrl-C and resumed, its decisions the same as an unbroken run's; the range edge and a wider range in a real scan."""

import json
import signal

import pytest

from bilevel_tune.cli.main import main
from bilevel_tune.cli.staging import ARCHIVE_DIR
from bilevel_tune.core import metrics
from bilevel_tune.report.outputs import summarise
from bilevel_tune.study_data.run_store import open_store
from bilevel_tune.verdicts import decide

from .study_helpers import interrupt, raw_generation_lines, study_args, study_process, trial_records, wait_for

pytestmark = pytest.mark.ray
# two groups (population 1 and 16, one mechanism): one comparison; 3 stages of one seed, 2 trials each
SMALL = dict(inner="analytic", population="1,16", optimize_params="min_demand_frac", seed=42)
ONE_A_STAGE = ("--set", "decide.seeds_per_stage=1", "--set", "decide.max_seeds=3", "--set", "decide.margin=none")
SESSION = ("--cpus-per-trial", "1", "--wandb", "disabled")
GENERATIONS = 60  # Ctrl-C lands at 5 of a stage's 60: seconds to spare on a quiet machine; more proves nothing


def stages_of(run) -> list[dict]:
    return json.loads((run / "study.json").read_text())["stages"]


def finals(run) -> dict[str, float]:
    return {
        name.rsplit("_", 2)[0]: final[metrics.FINAL_BEST] for name, (_, final) in trial_records(run).items() if final
    }  # by trial name, less Tune's id


def test_a_two_seed_run_continues_in_stages_and_a_stage_survives_ctrl_c(ray_cluster, tmp_path, capsys):
    # the reference: one unbroken run in stages
    whole_args = study_args(
        tmp_path, "--quick", "--until-decided", *ONE_A_STAGE, *SESSION, name="whole", outer_iters=GENERATIONS, **SMALL
    )
    assert main(whole_args) == 0
    whole = tmp_path / "whole"
    assert [s["stage"] for s in stages_of(whole)] == [1, 2, 3] and len(trial_records(whole)) == 6
    assert "stage 3 decided:" in capsys.readouterr().out

    # a run made without stages (one seed), then continued as its next stages; Ctrl-C in stage 2
    args = study_args(tmp_path, "--quick", *ONE_A_STAGE, *SESSION, name="run", outer_iters=GENERATIONS, **SMALL)
    assert main(args) == 0 and "stages" not in json.loads((tmp_path / "run" / "study.json").read_text())
    run = tmp_path / "run"
    # the session options again: each stage's two trials at once, one CPU each, as in the unbroken run
    resume = ["weekend", "--resume", "--name", "run", "--results", str(tmp_path), "--until-decided", *SESSION]
    proc = study_process(resume)
    stage_two = lambda: [g for g, _ in trial_records(run).values() if g and g[0][metrics.SEED] != 42]  # noqa: E731
    wait_for(lambda: any(len(g) >= 5 for g in stage_two()), timeout=240, interval=0.05)
    out = interrupt(proc, signal.SIGINT)
    assert proc.returncode == 130, out[-3000:]
    assert "--until-decided" in out.strip().splitlines()[-1], "the resume line carries --until-decided"
    assert [s["stage"] for s in stages_of(run)] == [1, 2] and stages_of(run)[0]["decisions"][0]["outcome"] == "open"
    assert (run / ARCHIVE_DIR / "1" / "tuner.pkl").is_file(), "stage 1's Tune state is set aside, stage 2's is current"

    assert main(resume) == 0  # in this process, on the session's Ray: a resume runs anywhere
    assert [s["stage"] for s in stages_of(run)] == [1, 2, 3]
    for name, (generations, final) in trial_records(run).items():  # every generation once, every trial to its end
        assert final is not None and [g[metrics.GENERATION] for g in generations] == list(range(GENERATIONS)), name
        assert sorted(raw_generation_lines(run / name / "generations.jsonl"))[-1] == GENERATIONS - 1
    # the same seeds, the same scores, the same decisions as the unbroken run's, stage by stage
    assert finals(run) == finals(whole)
    assert [s["seeds"] for s in stages_of(run)] == [s["seeds"] for s in stages_of(whole)]
    assert [s["decisions"] for s in stages_of(run)] == [s["decisions"] for s in stages_of(whole)]
    answers = summarise(open_store(run)).answers
    assert answers.decisions.looks == 3 and answers.rows[0].decision.outcome in (decide.UNDECIDED, decide.B_BETTER)
    headings = [line for line in (run / "summary.md").read_text().splitlines() if line.startswith("## ")]
    assert headings[0] == "## Answers"

    # the plan ended undecided: a larger one declared on resume, every look replayed under it, one more stage
    if answers.rows[0].decision.outcome == decide.UNDECIDED:
        extend = ["weekend", "--resume", "--name", "whole", "--results", str(tmp_path), "--until-decided", *SESSION]
        assert main([*extend, "--extend-plan", "4"]) == 0
        record = json.loads((whole / "study.json").read_text())
        assert record["study"]["decide"]["max_seeds"] == 4 and len(record["stages"]) == 4
        assert [(e["from_max_seeds"], e["to_max_seeds"], e["after_stage"]) for e in record["plan_extensions"]] == [
            (3, 4, 3)
        ]
        assert record["stages"][2]["superseded"][0]["max_seeds"] == 3  # stage 3 decided again under the new plan
        assert summarise(open_store(whole)).answers.decisions.stages == 4


def test_a_margin_declared_on_resume_decides_from_the_next_look_and_is_recorded(ray_cluster, tmp_path, capsys):
    """A run's first stage, then `--resume --until-decided --declare-margin` (with `--extend-plan` in the same
    command: both are recorded): no look was taken, so the margin decides from look 1; study.json, its stage log and
    run.md's stages say so, answers.csv gives every row a decision. A margin wider than any difference the runs show
    decides the one row equivalent at the first look with a t (the second: one seed a stage), and the run ends early,
    saying so. A second margin is refused in one line."""
    args = study_args(tmp_path, "--quick", *ONE_A_STAGE, *SESSION, name="m", outer_iters=5, **SMALL)
    assert main(args) == 0
    resume = ["weekend", "--resume", "--name", "m", "--results", str(tmp_path), "--until-decided", *SESSION]
    capsys.readouterr()
    assert main([*resume, "--declare-margin", "5", "--extend-plan", "4"]) == 0
    out = capsys.readouterr().out
    record = json.loads((tmp_path / "m" / "study.json").read_text())
    assert [(e["from_max_seeds"], e["to_max_seeds"]) for e in record["plan_extensions"]] == [(3, 4)]
    assert record["study"]["decide"]["margin"] == 5 and record["study"]["decide"]["margin_from"] == 1
    assert [(d["margin"], d["from_look"]) for d in record["margin_declarations"]] == [(5, 1)]
    assert record["stages"][0]["margin_declared"]["margin"] == 5
    assert [s["stage"] for s in record["stages"]] == [1, 2], "stage 3 not run: every row decided at look 2"
    assert "every comparison decided after stage 2 of 4: the run ends early, its last 2 stage(s) not needed" in out
    answers = (tmp_path / "m" / "answers.csv").read_text().splitlines()
    assert answers[0].split(",")[2:5] == ["answer", "decision", "within_margin"] and len(answers) == 2
    assert answers[1].split(",")[3:5] == ["equivalent", "True"] and "equivalent within ±5" in answers[1]
    from bilevel_tune.cli.run_record import stages

    assert any("A margin of 5 (the smallest difference that matters) was declared before look 1" in line
               for line in stages(open_store(tmp_path / "m")))  # fmt: skip
    assert main([*resume, "--declare-margin", "0.02"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "the run's plan already declares margin 5, from look 1" in err


def test_the_scan_reports_the_range_edge_and_a_wider_range_moves_it(ray_cluster, tmp_path):
    small = dict(inner="analytic", wandb="disabled", population=1, optimize_params="min_demand_frac", seed=42)
    assert main(study_args(tmp_path, "--quick", name="edge", outer_iters=40, scan=11, **small)) == 0
    edges = summarise(open_store(tmp_path / "edge")).edges
    assert [(e["rule"], e["side"], e["limit"], e["scans"]) for e in edges] == [("min_demand_frac", "upper", 0.35, 1)]
    assert "edge: min_demand_frac at its upper limit 0.35" in (tmp_path / "edge" / "summary.md").read_text()
    wider = ["--set", "search.min_demand_frac=0,0.7"]
    assert main(study_args(tmp_path, "--quick", *wider, name="wider", outer_iters=40, scan=11, **small)) == 0
    assert summarise(open_store(tmp_path / "wider")).edges == ()
