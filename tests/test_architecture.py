"""The import rules of docs/architecture.md hold, and the check would catch a break of each."""

import ast
import dataclasses
import re
import textwrap
from pathlib import Path

from .import_graph import LAYERS, imports, upward, violations

PACKAGE = Path(__file__).resolve().parent.parent / "bilevel_tune"


def test_the_house_keeps_its_import_rules():
    graph = imports(PACKAGE)
    assert "ray.rllib" in graph["bilevel_tune.appo.env_runner"] and "ray.rllib" in graph["bilevel_tune.appo.module"]
    assert "ray.tune" in graph["bilevel_tune.tune_edge.trainable"]
    assert violations(graph) == []


# At most one import may run up the floors, with its reason.
UPWARD_EXCEPTIONS: dict[str, str] = {
    "bilevel_tune → bilevel_tune.reader": "the package's face offers its public reader, bilevel_tune.open(run_dir), "
    "imported only when it is called: `import bilevel_tune` (every Ray worker does) loads no pandas",
}


def test_every_import_runs_down_the_floors():
    graph = imports(PACKAGE)
    folders = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()} - {"studies"}
    assert folders == set(LAYERS), "every folder of the package is a floor of docs/architecture.md"
    assert len(UPWARD_EXCEPTIONS) <= 1
    assert [line for line in upward(graph) if line not in UPWARD_EXCEPTIONS] == []
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    assert [f for f in re.findall(r"^\| \*\*.*?\*\* `(\w+)/`", page, re.M)] == list(reversed(LAYERS))


def test_the_floor_check_sees_an_import_that_runs_up(tmp_path):
    package = write_package(
        tmp_path,
        {"base.__init__": "", "base.knobs": "from bilevel_tune.core import es\n", "core.__init__": "", "core.es": ""},
    )
    assert upward(imports(package)) == ["bilevel_tune.base.knobs → bilevel_tune.core.es"]


def write_package(root: Path, modules: dict[str, str]) -> Path:
    package = root / "bilevel_tune"
    for name, source in modules.items():
        path = package / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(source))
    (package / "__init__.py").touch()
    return package


def test_each_rule_fails_when_broken(tmp_path):
    broken = write_package(
        tmp_path,
        {
            "core.__init__": "",
            "core.es": "def f():\n    import ray  # a numpy-core module reaching for Ray, inside a function\n",
            "worlds.__init__": "",
            "worlds.fresh_water.__init__": "",
            "worlds.fresh_water.law": "from bilevel_tune import helper\n",
            "helper": "import ray.util\n",
            "loop": "from ray.rllib.algorithms import appo\nfrom bilevel_tune import tuned\n",
            "tuned": "from ray import tune\n",
            "report": "import pandas\n\ndef draw():\n    from bilevel_tune import loop\n",
            "a": "from bilevel_tune import b\n",
            "b": "def f():\n    from bilevel_tune.a import x\n",
        },
    )
    found = violations(imports(broken), numpy_core=("bilevel_tune.core", "bilevel_tune.worlds"))
    assert "bilevel_tune.core.es is numpy core but imports Ray" in found
    assert "bilevel_tune.worlds.fresh_water.law is numpy core but imports Ray" in found  # through another module
    assert "bilevel_tune.loop imports ray.rllib and ray.tune" in found
    assert "bilevel_tune.report imports pandas/matplotlib and, through bilevel_tune.loop, ray.rllib" in found
    assert "import circle: bilevel_tune.a → bilevel_tune.b → bilevel_tune.a" in found


HASH = re.compile(r"^[0-9a-f]{7,}$")  # a commit or a fingerprint is a value, though it may start with a letter


def test_every_name_the_docs_quote_exists_in_the_code():
    """A backticked name in docs/ or README (not a path, flag or value) must be a word of the code, every dotted part."""
    import re

    root = PACKAGE.parent
    sources = (
        "bilevel_tune/**/*.py",
        "tests/*.py",
        "benchmarks/*.py",
        "studies/*.toml",
        "notebooks/*.ipynb",
    )
    corpus = "\n".join(
        p.read_text() for pattern in (*sources, "Makefile", "pyproject.toml") for p in root.glob(pattern)
    )
    words = set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", corpus))
    name = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*(\(\))?$")
    stale = [
        f"{doc.relative_to(root)}: `{token}`"
        for doc in [*sorted(root.glob("docs/**/*.md")), root / "README.md"]
        for token in re.findall(r"`([^`\n]+)`", doc.read_text())
        if name.match(token)
        and not HASH.match(token)
        and not all(part in words for part in token.removesuffix("()").split(".") if part != "py")
    ]
    assert stale == [], "names the docs quote that the code no longer has"


def test_every_module_of_the_package_is_named_on_the_architecture_page():
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`([\w/.]+?)(?:\.py|/)?`", page))
    modules = [
        path.relative_to(PACKAGE).with_suffix("").as_posix()
        for path in PACKAGE.rglob("*.py")
        if path.name != "__init__.py" and "studies" not in path.parts
    ]
    unnamed = [m for m in modules if m not in named and m.rsplit("/", 1)[-1] not in named]
    assert unnamed == [], f"modules the architecture page does not name: {unnamed}"


def test_the_paths_people_and_scripts_use_still_import_after_the_move_to_layer_folders():
    import bilevel_tune.es as es_path
    import bilevel_tune.objective as objective_path
    import bilevel_tune.study as study_path
    import bilevel_tune.summary as summary_path
    import bilevel_tune.world as world_path
    from bilevel_tune import inner
    from bilevel_tune.cli import main, summary_command
    from bilevel_tune.core import es
    from bilevel_tune.report import outputs, pipeline
    from bilevel_tune.worlds import fresh_water
    from bilevel_tune.worlds.fresh_water import objective

    assert es_path.ESConfig is es.ESConfig and es_path.ask is es.ask
    for name in ("day_upper_bound", "sustainability", "assess", "ObjectiveWeights", "ObjectiveSettings"):
        assert getattr(objective_path, name) is getattr(objective, name)
    for name in ("Basin", "Rules", "WorldConfig", "FreshWater", "RULE_SPECS"):
        assert getattr(world_path, name) is getattr(fresh_water, name)
    assert study_path.main is main.main and summary_path.main is summary_command.main
    assert summary_path.verdicts is pipeline.verdicts and summary_path.write_summary is outputs.write_summary
    assert (
        inner.InnerLoopConfig().season_length == 150
        and inner.BUILTIN_LOOPS["appo"] == "bilevel_tune.appo:PopulationPolicyLoop"
    )


# The world packages' own modules name their worlds; every other module reaches a world through the contract
# (`worlds.load_world`, a study's `world_kind`) — none may import a built-in world's package.
SHIMS = {"bilevel_tune.objective", "bilevel_tune.world"}  # the import paths of earlier releases, re-exported


def test_no_module_outside_the_worlds_names_a_world():
    graph = imports(PACKAGE)
    naming = sorted(
        module
        for module, targets in graph.items()
        if not module.startswith("bilevel_tune.worlds") and module not in SHIMS
        and any(t.startswith(("bilevel_tune.worlds.fresh_water", "bilevel_tune.worlds.fishery")) for t in targets)
    )  # fmt: skip
    assert naming == [], "modules outside worlds/ that import a world's package"
    code = {
        path.relative_to(PACKAGE).as_posix(): path.read_text()
        for path in PACKAGE.rglob("*.py")
        if "worlds" not in path.relative_to(PACKAGE).parts[:1] and path.stem not in ("objective", "world")
    }
    outcome_types = [name for name, text in code.items() if "CandidateOutcome" in text]
    assert outcome_types == [], "one outcome type: the contract's Assessment"


def _code_names(tree) -> set[str]:
    """The identifiers and string constants a module's code uses: its docstrings and comments are not code."""
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)
    }  # fmt: skip
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings:
            names.add(node.value)
        elif isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return names


# Loaders of records made when fresh water was the only world: they read its old keys by name.
OLD_RECORD_LOADERS = {"study_data/study_record.py", "study_data/settings.py"}  # 0.1 and 0.2 records, budget keys


def test_no_code_outside_the_worlds_names_a_fresh_water_rule_or_outcome():
    from bilevel_tune.worlds.fresh_water import FreshWater
    from bilevel_tune.worlds.fresh_water.objective import DIAGNOSTICS, TERMS

    own = {spec.name for spec in FreshWater.rule_specs} | set(TERMS) | set(DIAGNOSTICS) | {
        f.name for f in dataclasses.fields(FreshWater.settings_class)} - {"horizon"}  # fmt: skip
    naming = {}
    for path in PACKAGE.rglob("*.py"):
        name = path.relative_to(PACKAGE).as_posix()
        if name.startswith(("worlds/", "studies/")) or name in OLD_RECORD_LOADERS | {"world.py", "objective.py"}:
            continue
        found = sorted(own & _code_names(ast.parse(path.read_text())))
        if found:
            naming[name] = found
    assert naming == {}, "code outside worlds/ that names fresh water's rules, settings or outcome fields"
    assert {"quota_penalty", "num_farms", "min_demand_frac"} <= own  # the check looks for what it should
