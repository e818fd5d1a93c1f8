# Set-up and everyday tasks. Everything runs inside .venv, created on first use.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
DEMO_DIR ?= demo

.PHONY: setup demo test bench bench-check clean

setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $@

demo: setup
	KB=$(BIN)/kb DEMO_DIR=$(DEMO_DIR) bash scripts/demo.sh

test: setup
	$(BIN)/pytest -n 2

bench-check: setup
	$(BIN)/python bench/check_scale.py --pages 10000 --evidence 2000

bench: bench-check

clean:
	rm -rf $(VENV) $(DEMO_DIR) .pytest_cache
