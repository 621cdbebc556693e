# kernel zoo — `make up` runs the whole platform locally; `make test` runs every suite.
# Both create .venv and install what they need (system packages through apt-get when root).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
PYTEST := $(BIN)/pytest
export PATH := $(CURDIR)/$(BIN):$(PATH)

.PHONY: help setup system-deps up test lint types unit integration system webui-js webui-browser \
        coverage bench schemas clean gpu-check gpu-wheels

help:
	@echo "make up      - install and run the whole platform locally (prints the URL)"
	@echo "make test    - install and run lint, types and every test suite"
	@echo "make bench   - run every benchmark and write bench/RESULTS.md"
	@echo "make gpu-check - on a CUDA host: the GPU check (docs/gpu.md; OUT=folder)"

$(STAMP): pyproject.toml
	@bash scripts/system-deps.sh
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	# The CPU build of torch, pinned: an open range would pull a CUDA build of several GB.
	$(BIN)/python -m pip install --quiet torch==2.13.0
	$(BIN)/python -m pip install --quiet -e '.[dev,torch]'
	@touch $@

setup: $(STAMP)

system-deps:
	@bash scripts/system-deps.sh

up: setup
	$(BIN)/kz up $(ARGS)

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: setup
	$(BIN)/mypy

unit: setup
	$(PYTEST) -m unit -q

integration: setup
	$(PYTEST) -m integration -q

system: setup
	$(PYTEST) -m system -q

webui-js:
	@if command -v node >/dev/null 2>&1 && [ -d tests/webui/js ]; then \
		node --test tests/webui/js/; \
	else echo "node or tests/webui/js missing: skipping the JS unit tests"; fi

webui-browser: setup
	$(PYTEST) -m webui -q

# The full suite: lint, types, every pytest layer with coverage, the coverage gates and the JS
# tests. Every layer runs and is reported (result, counts, time); it fails if any layer failed.
test: setup
	$(BIN)/python scripts/run_tests.py

bench: setup
	$(BIN)/python bench/run_all.py

schemas: setup
	$(BIN)/python -m kz_events.schema_gen
	$(BIN)/python -m kz_events.vocab_gen

# Not part of `make test`: the GPU check needs a CUDA host and the wheel set (docs/gpu.md).
gpu-wheels: setup
	bash scripts/gpu_wheels.sh

gpu-check:
	bash scripts/gpu_check.sh $(ARGS) $(OUT)

clean:
	rm -rf $(VENV) .kz kernel_data .pytest_cache .mypy_cache .ruff_cache .coverage*
