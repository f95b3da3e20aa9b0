# Two commands for a newcomer: `make lab` and `make test`. Both (re)build .venv from
# requirements.txt when it is missing or older than requirements.txt, and are safe to re-run.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab test lint unit notebooks bench clean test-browser present llama-server

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "llminfer needs Python >= 3.10")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $(STAMP)

# Jupyter refuses to run as root unless told; containers often run as root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

lab: $(STAMP)
	$(BIN)/jupyter lab notebooks/ $(ALLOW_ROOT)

# ruff, the import-layer contracts (.importlinter), the unit tests and strict nbval over every
# notebook, on every core (up to 4; each notebook stays on one worker: --dist loadfile). pytest
# exits 5 when it ran no test, and make fails on any non-zero exit, so "no test ran" fails.
PYTEST_PARALLEL := -n auto --maxprocesses 4 --dist loadfile
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	LLMINFER_PREFETCH=0 $(BIN)/python -m pytest $(PYTEST_PARALLEL)

# Re-execute every notebook in place, deterministically, with volatile metadata stripped.
notebooks: $(STAMP)
	LLMINFER_PREFETCH=0 $(BIN)/python scripts/run_notebooks.py notebooks/*.ipynb

# Every notebook in a real browser: JupyterLab on 127.0.0.1 and headless Chromium (Playwright)
# run all cells and move every control of every explorer; report in benchmarks/out/. Skipped,
# with a message, where Chromium is missing (apt-get install chromium). At most 10 minutes.
# BROWSER_FLAGS: e.g. --latency-report-only (report the latency, do not fail on it) or --max-p95-ms 300.
test-browser: $(STAMP)
	$(BIN)/python scripts/browser_check.py $(BROWSER_FLAGS)

# A workshop view: each notebook's prose, pictures and live explorers without the code (Voila on
# 127.0.0.1, an offline-safe template from present/: no request leaves the machine).
present: $(STAMP)
	JUPYTER_PATH=$(CURDIR)/present $(BIN)/voila notebooks/ --template=llminfer \
		--Voila.ip=127.0.0.1 --strip_sources=True

# llama.cpp's llama-server, pinned (the llama.cpp vendored in the llama-cpp-python 0.3.36 sdist),
# built into ~/.cache/llminfer/llama.cpp-0.3.36 when missing (cmake and a C++ compiler; ~9 min
# on 2 cores, CPU only). tests/test_llama_server.py measures it; it skips when it is missing.
llama-server: $(STAMP)
	PYTHON=$(BIN)/python scripts/build_llama_server.sh

bench: $(STAMP)
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis
