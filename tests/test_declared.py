"""A setting is declared once, on its section's field: everything else derives from that declaration."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import bilevel_tune
from bilevel_tune.base.knobs import SettingError, knob, section_settings
from bilevel_tune.base.sections import AppoSettings, ESSettings, NetworkSettings
from bilevel_tune.core.es import ESConfig
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.study_data.settings import docs_table, settings_table
from bilevel_tune.worlds.fresh_water import WorldConfig
from bilevel_tune.worlds.fresh_water.objective import ObjectiveSettings

DOCS = Path(__file__).resolve().parent.parent / "docs" / "study.md"

# One new APPO knob, written where the [appo] section is declared — and nowhere else.
NEW_KNOB = '    clip_param: float = knob(0.4, "the surrogate loss\'s clip", low=0, open_low=True, appo=True)\n'
ANCHOR = "    fragments_per_batch: int = knob("

PROBE = r"""
import json, sys
from bilevel_tune.base import sections
from bilevel_tune.study_data.definition import Study, StudyError, load_study
from bilevel_tune.inner import InnerLoopConfig
from bilevel_tune.study_data.settings import docs_table
from bilevel_tune.study_data.design import compile_design

study = Study.from_toml(sys.argv[1])
weekend = load_study("weekend")
try:
    weekend.with_overrides(settings={"appo.clip_param": "-1"})
    refused = None
except StudyError as err:
    refused = str(err)
print(json.dumps({
    "declared_in": sections.__file__,
    "default": weekend.get("appo.clip_param"),
    "file": study.get("appo.clip_param"),
    "set": weekend.with_overrides(settings={"appo.clip_param": "0.25"}).get("appo.clip_param"),
    "refused": refused,
    "grid": sorted({dict(c.extra)["appo.clip_param"] for c in compile_design(weekend.with_overrides(grid={"appo.clip_param": "0.1,0.2"})).cells}),
    "docs": [row for row in docs_table().splitlines() if "clip_param" in row],
    "study_json": Study.from_dict(json.loads(json.dumps(study.to_dict()))).get("appo.clip_param"),
    "loop": InnerLoopConfig.from_study(study).clip_param,
    "loop_default": InnerLoopConfig().clip_param,
}))
"""


@pytest.mark.long
def test_a_setting_declared_in_one_place_reaches_the_file_the_command_line_the_docs_the_record_and_the_loop(tmp_path):
    package = tmp_path / "bilevel_tune"
    shutil.copytree(Path(bilevel_tune.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))
    sections = package / "base" / "sections.py"
    assert sections.read_text().count(ANCHOR) == 1
    sections.write_text(sections.read_text().replace(ANCHOR, NEW_KNOB + ANCHOR))
    study = tmp_path / "mine.toml"
    study.write_text(
        'name = "mine"\n[grid]\npopulation = [2]\noptimize_params = [["fixed_quota"]]\nseed = [1]\n'
        "[budget]\ngenerations = 2\n[appo]\nclip_param = 0.2\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}

    def run(*argv: str) -> str:
        done = subprocess.run([sys.executable, *argv], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    seen = json.loads(run("-c", PROBE, str(study)).strip().splitlines()[-1])
    assert seen["declared_in"] == str(sections)
    assert (seen["default"], seen["file"], seen["set"], seen["study_json"]) == (0.4, 0.2, 0.25, 0.2)
    assert seen["refused"] == "--set: appo.clip_param=-1.0 must be a number > 0"
    assert seen["grid"] == [0.1, 0.2]
    assert seen["docs"] == ["| `appo.clip_param` | 0.4 | a number > 0 | the surrogate loss's clip (APPO loops only) |"]
    assert (seen["loop"], seen["loop_default"]) == (0.2, 0.4)
    dry = run(
        "-m", "bilevel_tune.study", str(study), "--inner", "analytic", "--dry-run", "--set", "appo.clip_param=0.3"
    )
    (appo,) = [line for line in dry.splitlines() if line.strip().startswith("[appo]")]
    assert "clip_param 0.3" in appo and "not read by this inner loop" in appo


def test_the_docs_table_is_the_declarations_table():
    assert docs_table() in DOCS.read_text()


def test_the_configs_take_their_defaults_from_the_sections():
    defaults, by_key = settings_table().defaults, settings_table().by_key
    assert InnerLoopConfig().lr == AppoSettings().lr == defaults["appo.lr"]
    assert InnerLoopConfig().world_settings.num_farms == WorldConfig().num_farms == defaults["world.farms"]
    assert InnerLoopConfig().hidden == NetworkSettings().hidden == defaults["network.hidden"]
    assert InnerLoopConfig().objective_settings == ObjectiveSettings()  # the default world's, whole
    assert ESConfig().sigma == ESSettings().sigma == defaults["es.sigma"] and ESConfig().population == 1
    assert [s.key for s in section_settings("world", WorldConfig)][:2] == ["world.farms", "world.horizon"]
    assert by_key["world.farms"].field_name == "num_farms"


def test_a_config_checks_its_fields_with_the_studys_ranges():
    with pytest.raises(SettingError, match=r"^lr=0.0 must be a number in \(0, 1\]$"):
        InnerLoopConfig(lr=0.0)
    with pytest.raises(SettingError, match=r"^fragments_per_batch=0 must be an integer ≥ 1$"):
        InnerLoopConfig(fragments_per_batch=0)
    with pytest.raises(SettingError, match=r"^hidden=\(\) must be a non-empty list of layer sizes ≥ 1$"):
        InnerLoopConfig(hidden=())
    with pytest.raises(SettingError, match="both 0"):
        ObjectiveSettings(econ_weight=0.0, sus_weight=0.0)
    with pytest.raises(TypeError):
        ESConfig(16)  # the population is a keyword: ESConfig(population=16)


def test_knob_is_a_plain_dataclass_field():
    from dataclasses import dataclass, fields

    @dataclass(frozen=True)
    class Mine:
        depth: int = knob(3, "how deep", low=1)

    (field,) = fields(Mine)
    assert Mine().depth == 3 and field.default == 3
    (declared,) = section_settings("mine", Mine)
    assert (declared.key, declared.kind, declared.allowed) == ("mine.depth", "int", "an integer ≥ 1")
