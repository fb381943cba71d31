# Every target sets up what it needs: a project-local .venv on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The CPU wheel of torch (an unpinned torch pulls a multi-GB CUDA build).
TORCH  ?= torch==2.13.0

# Ray 2.53: the oldest supported release, whose APPO leaves the learner thread alive (by-hand stop path).
VENV253  := .venv-ray253
STAMP253 := $(VENV253)/.installed

.PHONY: setup study test test-fast test-ray253 lint check bench clean

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

## Every test tier (unit, ray, slow), in two lanes at once (tests/lanes.py): the numpy tier with the Ray tests
## whole in one process, beside the tests that own more of the machine (a study's process stopped by a signal,
## extra Ray nodes, /tmp watched last). Each pytest session has a scratch folder of its own; the shared lane's
## report follows the other's.
test: $(STAMP)
	@WANDB_MODE=offline $(BIN)/python -m pytest -p no:cacheprovider --lane shared > .pytest-lane.log 2>&1 & lane=$$!; \
	WANDB_MODE=offline $(BIN)/python -m pytest --lane own; rest=$$?; \
	wait $$lane; shared=$$?; echo; echo "== the shared lane (pytest --lane shared)"; cat .pytest-lane.log; \
	rm -f .pytest-lane.log; [ $$rest -eq 0 ] && [ $$shared -eq 0 ]

## The APPO loops' tests (leak-free stop, exactness, parity; on any world, less the whole studies of the fishery and MPE2) on Ray 2.53, in a separate small virtualenv.
$(STAMP253): pyproject.toml
	$(PYTHON) -m venv $(VENV253)
	$(VENV253)/bin/python -m pip install -q --upgrade pip
	$(VENV253)/bin/python -m pip install -q "$(TORCH)" "ray[rllib,tune]==2.53.0" gymnasium threadpoolctl setproctitle psutil pytest pandas matplotlib pettingzoo mpe2
	$(VENV253)/bin/python -m pip install -q --no-deps -e .
	touch $(STAMP253)

test-ray253: $(STAMP253)
	RAY_AUTH_MODE=disabled $(VENV253)/bin/python -m pytest -p no:cacheprovider tests/test_appo.py tests/test_population.py tests/test_ray_compat.py \
		tests/test_appo_worlds.py -k "not fishery_study and not mpe2_study"

## The numpy tier: the minute-long loop (no Ray, no RLlib, no process of its own; `make test` runs every tier).
test-fast: $(STAMP)
	$(BIN)/python -m pytest -m "not ray and not slow and not rllib and not install and not long"

check: $(STAMP)
	$(BIN)/python -m bilevel_tune.worlds.check && $(BIN)/python -m bilevel_tune.appo.env_check --world fresh-water && $(BIN)/python -m bilevel_tune.appo.env_check --world fishery

lint: $(STAMP)
	$(BIN)/ruff check bilevel_tune tests benchmarks

clean:
	rm -rf $(VENV) $(VENV253) .pytest_cache
