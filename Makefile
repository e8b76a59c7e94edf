# The two commands a newcomer needs: `make demo` and `make test`. Both set everything up by themselves
# (a .venv with the right torch build for this machine; see scripts/bootstrap.sh).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test lint bench setup setup-dev system-deps clean

setup:
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/bootstrap.sh

setup-dev:
	PYTHON=$(PYTHON) VENV=$(VENV) scripts/bootstrap.sh dev

demo: setup
	$(BIN)/swerl quickstart --overwrite

system-deps:
	scripts/system_deps.sh

lint: setup-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

test: lint system-deps
	$(BIN)/python -m pytest -n 2 -q

bench: setup-dev
	$(BIN)/python bench/reward.py

clean:
	rm -rf $(VENV) build *.egg-info swerl/fastdiff/*.so data_pipeline/*.so runs .pytest_cache .ruff_cache .hypothesis
