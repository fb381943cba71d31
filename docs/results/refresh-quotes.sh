#!/usr/bin/env bash
# After a shipped result changes: regenerate the README's and docs' quoted blocks from the shipped summaries and
# re-execute the notebook that reads them (ship-stage.sh and heldout-later.sh end with it).
set -euo pipefail
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
.venv/bin/python -m bilevel_tune.cli.quotes README.md docs/worlds.md
.venv/bin/python - <<'PY'
import nbformat
from nbclient import NotebookClient

notebook = nbformat.read("notebooks/study_results.ipynb", as_version=4)
NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": "."}}).execute()
nbformat.write(notebook, "notebooks/study_results.ipynb")
PY
