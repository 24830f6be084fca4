# One command each: `make verify` (set up, generate, verify) and `make test` (set up, run the tests).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: setup generate check verify test clean

$(BIN)/losscc: pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints.txt -e '.[frameworks,jax,test,docs]'
	touch $@

setup: $(BIN)/losscc

generate: setup
	$(BIN)/losscc generate

check: setup
	$(BIN)/losscc check

verify: generate
	$(BIN)/losscc verify

# two worker processes: CI has two cores, and most of a test's time is one core's work
# (graph compilation, the reference evaluator); TEST_WORKERS=0 runs in this process
TEST_WORKERS ?= 2

test: setup
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadfile --durations=20

clean:
	rm -rf $(VENV) .pytest_cache
