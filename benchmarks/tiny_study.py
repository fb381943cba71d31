"""Run a small study from TOML text in a temporary folder and return its trial records (for benchmarks)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from bilevel_tune.cli.main import main as study_main
from bilevel_tune.study_data.run_folder import GENERATIONS_FILE, read_records


def tiny_study_toml(
    name: str, population: int, optimize_params: list[str], generations: int, inner_iters: int, final_eval_seeds: int
) -> str:
    """One real-APPO cell in a tiny world: 2 farms, 20-day seasons, one 16-unit layer."""
    return f"""
name = "{name}"
inner = "appo"
[grid]
population = [{population}]
optimize_params = [{optimize_params!r}]
seed = [0]
[world]
farms = 2
horizon = 20
[network]
hidden = [16]
[budget]
generations = {generations}
inner_iters = {inner_iters}
final_eval_seeds = {final_eval_seeds}
""".replace("'", '"')


def run_tiny_study(toml: str, *args: str) -> list[tuple[str, list[dict], dict | None, str]]:
    """(trial folder name, generation rows, final record, progress.csv text) per trial; exits if the study fails."""
    with tempfile.TemporaryDirectory() as tmp:
        study_file = Path(tmp, "study.toml")
        study_file.write_text(toml)
        code = study_main([str(study_file), "--results", tmp, "--name", "run", "--num-cpus", "2", *args])
        if code:
            raise SystemExit(code)
        trials = []
        for path in sorted(Path(tmp, "run").glob(f"*/{GENERATIONS_FILE}")):
            rows, final = read_records(path)
            progress = (path.parent / "progress.csv").read_text()
            trials.append((path.parent.name, rows, final, progress))
        return trials
