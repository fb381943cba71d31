"""The notebook rebuilds grid, verdicts, plots and the scan's landscape from a run folder the project's own study code made."""

import os

import nbformat
import pytest
from nbclient import NotebookClient

from bilevel_tune.running.cli import main

from .study_helpers import REPO, study_args

pytestmark = pytest.mark.ray


def test_notebook_runs_on_a_study_run_folder(ray_cluster, tmp_path, monkeypatch):
    args = study_args(
        tmp_path, "--quick", inner="analytic", wandb="disabled", population="1,2", seed="1,2", outer_iters=3, scan=3
    )
    assert main(args) == 0
    monkeypatch.setenv("BILEVEL_RUN_DIR", str(tmp_path / "run"))
    notebook = nbformat.read(REPO / "notebooks" / "best_objective_grid.ipynb", as_version=4)
    NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(REPO / "notebooks")}}
    ).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(str(o.get("data", {}).get("text/plain", "")) + o.get("text", "") for o in outputs)
    assert "1-D" in text and "2-D" in text and "population_effect" in text
    assert sum("image/png" in o.get("data", {}) for o in outputs) == 3 + 2  # and the 1-D and 2-D landscapes
    assert "regret" in text and "scan_best" in text
    assert os.environ["BILEVEL_RUN_DIR"] in text
