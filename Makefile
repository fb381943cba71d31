# Every target sets up what it needs: a project-local .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The CPU wheel of torch (an unpinned torch pulls a multi-GB CUDA build).
TORCH  ?= torch==2.13.0

.PHONY: setup study test test-fast lint check bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q "$(TORCH)"
	$(BIN)/python -m pip install -q -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

## The main job: the weekend study at its quick budget, embedded local Ray, W&B offline.
study: $(STAMP)
	$(BIN)/python -m bilevel_tune.study weekend --quick --wandb offline

## Every test tier (unit, ray, slow).
test: $(STAMP)
	WANDB_MODE=offline $(BIN)/python -m pytest

## The fast tier only.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not ray and not slow"

check: $(STAMP)
	$(BIN)/python -m bilevel_tune.world.check

lint: $(STAMP)
	$(BIN)/ruff check bilevel_tune tests benchmarks

clean:
	rm -rf $(VENV) .pytest_cache
