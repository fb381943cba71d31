"""The notebook opens a shipped result (from notebooks/) and a fresh run folder (from the repository root), and its
committed copy keeps its outputs."""

import nbformat
import pytest
from nbclient import NotebookClient

from bilevel_tune.cli.main import main

from .study_helpers import REPO, study_args

NOTEBOOK = REPO / "notebooks" / "study_results.ipynb"


def execute(cwd, monkeypatch, run_dir=None):
    if run_dir is not None:
        monkeypatch.setenv("BILEVEL_RUN_DIR", str(run_dir))
    else:
        monkeypatch.delenv("BILEVEL_RUN_DIR", raising=False)
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(
        str(o.get("data", {}).get("text/plain", ""))
        + str(o.get("data", {}).get("text/markdown", ""))
        + o.get("text", "")
        for o in outputs
    )
    return outputs, text


def images(outputs) -> int:
    return sum("image/png" in o.get("data", {}) for o in outputs)


def test_the_committed_notebook_shows_its_outputs_and_reads_through_the_public_reader_alone():
    cells = nbformat.read(NOTEBOOK, as_version=4).cells
    outputs = [o for cell in cells for o in cell.get("outputs", [])]
    assert images(outputs) >= 5, "committed executed against docs/results/ceiling-appo, outputs kept"
    code = "\n".join(cell.source for cell in cells if cell.cell_type == "code")
    assert "bilevel_tune.open(" in code
    assert "from bilevel_tune" not in code and "import bilevel_tune." not in code, "no internal module of the package"


@pytest.mark.long
def test_the_notebook_opens_a_shipped_result_from_the_notebooks_folder(monkeypatch):
    outputs, text = execute(REPO / "notebooks", monkeypatch)  # the default: docs/results/ceiling-appo
    assert "docs/results/ceiling-appo" in text and "study ceiling · inner loop appo · budget full" in text
    assert "| comparison" in text and "2-D floor+risk vs 1-D at population 1" in text and "B − A" in text
    assert "ceiling_pop16_2d_seed42" in text  # the ceiling table
    assert images(outputs) == 2 + 1 + 1 + 1 + 3  # best so far ×2, final pairs, effects, ceiling, three landscapes


@pytest.mark.ray
def test_the_notebook_opens_a_run_folder_from_the_repository_root(ray_cluster, tmp_path, monkeypatch):
    args = study_args(
        tmp_path, "--quick", inner="analytic", wandb="disabled", population="1,2", optimize_params="min_demand_frac",
        seed="1,2", outer_iters=3, scan=3,
    )  # fmt: skip
    assert main(args) == 0
    outputs, text = execute(REPO, monkeypatch, tmp_path / "run")
    assert str(tmp_path / "run") in text and "population 2 vs population 1 at 1-D" in text
    assert "no held-out learners scored this run" in text
    assert images(outputs) == 2 + 1 + 1 + 1 + 1  # and the 1-D landscape
