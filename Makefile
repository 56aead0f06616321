# Two commands do all set-up on a fresh machine with Python >= 3.11:
#   make demo   create .venv, install every package (editable), run recipes/quickstart.yaml
#   make test   same install, then the whole test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PYPROJECTS := $(wildcard packages/*/pyproject.toml plugins/*/pyproject.toml)

.PHONY: install demo test lint bench clean

install: $(STAMP)

$(STAMP): Makefile constraints.txt requirements-dev.txt $(PYPROJECTS)
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "xfer needs Python >= 3.11"'
	$(PYTHON) -m venv $(VENV)
	# --no-cache-dir: no second copy of every downloaded wheel (a CI run ran out of disk in pip).
	$(BIN)/python -m pip install --quiet --no-cache-dir --upgrade pip
	# The CPU build of torch first, pinned: an open range would pull a multi-GB CUDA build.
	$(BIN)/python -m pip install --quiet --no-cache-dir torch==2.13.0
	$(BIN)/python -m pip install --quiet --no-cache-dir -r requirements-dev.txt
	@touch $@

demo: install
	$(BIN)/xfer run recipes/quickstart.yaml

test: install
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check packages plugins tests tools
	$(BIN)/ruff format --check packages plugins tests tools

bench: install
	$(BIN)/python tools/bench_trainer.py
	$(BIN)/python tools/bench_encoder.py

clean:
	rm -rf $(VENV) runs
