"""Run options are declared once: the parser, its help, study.json's record, the resume line and the resume check follow."""

import dataclasses
from pathlib import Path

import pytest

from bilevel_tune.cli.options import (
    SESSION,
    STUDY,
    RunOptions,
    _int_list,
    build_parser,
    changed_on_resume,
    fields_of,
    option,
    options_from,
    resume_command,
    session_record,
)
from bilevel_tune.study_data.definition import load_study


@dataclasses.dataclass(frozen=True)
class Extended(RunOptions):
    """RunOptions with one more session option and one more study option, declared as every option is."""

    greeting: str | None = option("--greeting", "say hello to the cluster", SESSION)
    seed_axis: tuple[int, ...] | None = option(
        "--seed-axis", "the seed axis, once more", STUDY, parse=_int_list("--seed-axis"), override="seeds",
        aspect=lambda s: s.seeds,
    )  # fmt: skip


def test_a_new_option_in_the_table_reaches_parser_help_record_resume_line_and_check():
    parser = build_parser("prog", "a study runner", Extended)
    help_text = parser.format_help()
    assert "--greeting" in help_text and "say hello to the cluster" in help_text and "--seed-axis" in help_text
    args = parser.parse_args(["weekend", "--greeting", "hi", "--seed-axis", "3,4", "--wandb", "disabled"])
    options = options_from(args, "bilevel-study", Extended)
    assert options.greeting == "hi" and options.seed_axis == (3, 4) and options.wandb == "disabled"
    assert session_record(options)["greeting"] == "hi"
    assert "--greeting hi" in resume_command(options, Path("/r/run"))
    recorded = load_study("weekend")
    assert changed_on_resume(Extended(study="weekend", seed_axis=(5,)), recorded) == ["--seed-axis"]
    assert changed_on_resume(Extended(study="weekend", seed_axis=(42, 7)), recorded) == []  # repeating is fine


def test_every_option_has_a_flag_help_and_group_and_the_study_ones_say_what_they_change():
    for f in fields_of(RunOptions):
        m = f.metadata
        assert m["flag"].startswith("--") and m["help"] and m["group"] in (STUDY, "run folder", SESSION)
        if m["group"] == STUDY:
            assert m["override"] and m["aspect"], f.name
    assert {f.metadata["flag"] for f in fields_of(RunOptions, STUDY)} >= {"--set", "--grid", "--scan", "--inner"}


@pytest.mark.parametrize(
    "given, changed",
    [
        ({}, []),
        ({"budget": "quick"}, ["--budget"]),
        ({"seeds": (42, 7)}, []),
        ({"seeds": (1,)}, ["--seed"]),
        ({"settings": (("appo.lr", "0.001"),)}, []),  # the recorded value
        ({"settings": (("appo.lr", "0.002"),)}, ["--set"]),
        ({"grid": (("es.sigma", "0.05,0.15"),)}, ["--grid"]),
        ({"scan": 3}, ["--scan"]),
        ({"settings": (("appo.lrr", "1"),)}, ["--set"]),  # a study option that cannot even resolve counts as a change
    ],
)
def test_a_resume_refuses_exactly_the_study_options_that_change_the_recorded_study(given, changed):
    assert changed_on_resume(RunOptions(study="weekend", **given), load_study("weekend")) == changed


def test_the_session_record_holds_every_session_option_and_nothing_of_the_study():
    record = session_record(RunOptions(study="weekend", num_cpus=4, thread_cap=2, dashboard_host="0.0.0.0"))
    assert set(record) == {f.name for f in fields_of(RunOptions, SESSION)}
    assert record["num_cpus"] == 4 and record["dashboard"] is True  # --dashboard-host implies --dashboard
    assert "settings" not in record and "populations" not in record
