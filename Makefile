# Two commands for a newcomer: `make lab` and `make test`. Both (re)build .venv from
# requirements.txt when it is missing or older than requirements.txt, and are safe to re-run.
# The interpreter .venv is built with (override: make test PYTHON=python3.12): the system's
# /usr/bin/python3 where it is Python >= 3.10 with venv and ensurepip, else python3 on the PATH.
# Linux distributions build their Python with profile-guided and link-time optimisation; pyenv
# and other source builds do not by default, and most of what the notebooks and the suite run is
# Python. Measured on the 2-core machine of 2026-12-07 (a loop of 10 million additions 0.61 s
# with Debian's 3.11.2, 0.90 s with pyenv's 3.11.7): make test 206-222 s of user CPU against
# 225-243 s, 120-128 s against 129-139 s of wall time, the two built alternately.
SYSTEM_PYTHON := /usr/bin/python3
USABLE_PYTHON := import sys, venv, ensurepip; sys.exit(sys.version_info < (3, 10))
ifndef PYTHON
PYTHON := $(if $(shell $(SYSTEM_PYTHON) -c '$(USABLE_PYTHON)' >/dev/null 2>&1 && echo yes),$(SYSTEM_PYTHON),python3)
endif
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: lab test lint unit notebooks bench clean test-browser present llama-server lite lite-wheels test-lite catalogs glossary

$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 10) and "llminfer needs Python >= 3.10")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -r requirements.txt
	touch $(STAMP)

# Jupyter refuses to run as root unless told; containers often run as root.
ALLOW_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

# The edition: `make lab LANG=zh` (or a Chinese locale, LANG=zh_CN.UTF-8) opens the Chinese one in
# notebooks/zh/, anything else the English one. A LANG given on the command line only picks the
# edition: the programs themselves run without it (LANG=zh is no locale) and with
# LLMINFER_LANG set, so the package speaks the edition's language in a new notebook too.
EDITION_LANG := $(if $(filter zh%,$(LANG)),zh,en)
EDITION      := $(if $(filter zh,$(EDITION_LANG)),notebooks/zh,notebooks)
EDITION_ENV  := $(if $(filter command line,$(origin LANG)),env -u LANG,env) LLMINFER_LANG=$(EDITION_LANG)

lab: $(STAMP)
	$(EDITION_ENV) $(BIN)/jupyter lab $(EDITION)/ $(ALLOW_ROOT)

# ruff, the import-layer contracts (.importlinter), the unit tests and strict nbval over every
# notebook, on two more workers than cores (at most 6: notebook 08's sweeps, both editions, and
# several tests wait on servers that sleep to a paced step time, so spare workers keep the CPUs
# busy meanwhile; on 2 cores 4 workers took 121-133 s, 3 workers 141-144 s, 5 workers 147 s;
# each notebook stays on one worker: --dist loadfile). pytest exits 5 when it ran no test, and
# make fails on any non-zero exit, so "no test ran" fails.
PYTEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); echo $$(( n + 2 > 6 ? 6 : n + 2 )))
PYTEST_PARALLEL := -n $(PYTEST_WORKERS) --dist loadfile --no-loadscope-reorder
# How the suite's processes share the cores (measured; README "How to test"):
# - one BLAS thread per process: the workers are the parallelism. OpenBLAS's own threads spin
#   while they wait, so 3 workers x 2 threads on 2 cores burned 3x the CPU of a numpy matmul
#   (the toy model's 3 timed generations: 6.1 s of CPU with 2 threads, 1.9 s with 1);
# - compiled bytecode kept (PYTHONDONTWRITEBYTECODE unset, where a machine sets it): the 4
#   workers, 18 notebook kernels and ~100 server and CLI processes otherwise each compile the
#   package and rewrite the test modules' asserts again (4.4 s of each worker's 9.7 s start-up).
# - no transparent huge pages asked for by numpy (NUMPY_MADVISE_HUGEPAGE=0): numpy advises the
#   kernel to back every array of 4 MiB or more with 2 MiB pages, and where the kernel then
#   compacts memory at the first touch (defrag "madvise", the common default) that fault costs
#   more than the pages save in a short test: the toy model's 621 MB of weights took 0.8-1.9 s
#   of system time to allocate against 0.34-0.39 s without (2026-12-08); make test, the two
#   alternately: 25.6-26.6 s of system time against 32.1-33.4 s, 152 s against 156 s.
ONE_BLAS_THREAD := OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
TEST_ENV := env -u PYTHONDONTWRITEBYTECODE $(ONE_BLAS_THREAD) NUMPY_MADVISE_HUGEPAGE=0 LLMINFER_PREFETCH=0
# More pytest arguments for make test (benchmarks/bench_suite_time.py adds its CPU plugin here).
PYTEST_ARGS ?=
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports --no-cache
	$(TEST_ENV) $(BIN)/python -m compileall -q -j 0 llminfer tests scripts
	$(TEST_ENV) $(BIN)/python -m pytest -p tests.suite_startup $(PYTEST_PARALLEL) $(PYTEST_ARGS)

# Re-execute every notebook of both editions in place, deterministically, with volatile metadata
# stripped.
notebooks: $(STAMP)
	LLMINFER_PREFETCH=0 $(BIN)/python scripts/run_notebooks.py notebooks/*.ipynb notebooks/zh/*.ipynb

# After marking a new message with _() in the package: extract it, merge it into each language's
# catalog (llminfer/language/locale/zh/LC_MESSAGES/*.po, to translate) and compile the .mo files
# (Babel). tests/test_language.py fails while a message has no Chinese entry.
catalogs: $(STAMP)
	$(BIN)/python scripts/catalogs.py

# After editing llminfer/language/glossary.csv: rewrite every notebook's glossary cell.
glossary: $(STAMP)
	$(BIN)/python scripts/glossary_cells.py

# Every notebook in a real browser: JupyterLab on 127.0.0.1 and headless Chromium (Playwright)
# run all cells and move every control of every explorer; report in benchmarks/out/. Skipped,
# with a message, where Chromium is missing (apt-get install chromium). At most 10 minutes.
# BROWSER_FLAGS: e.g. --latency-report-only (report the latency, do not fail on it) or --max-p95-ms 300.
test-browser: $(STAMP)
	$(BIN)/python scripts/browser_check.py $(BROWSER_FLAGS)

# A workshop view: each notebook's prose, pictures and live explorers without the code (Voila on
# 127.0.0.1, an offline-safe template from present/: no request leaves the machine).
present: $(STAMP)
	$(EDITION_ENV) JUPYTER_PATH=$(CURDIR)/present $(BIN)/voila $(EDITION)/ --template=llminfer \
		--Voila.ip=127.0.0.1 --strip_sources=True

# llama.cpp's llama-server, pinned (the llama.cpp vendored in the llama-cpp-python 0.3.36 sdist),
# built into ~/.cache/llminfer/llama.cpp-0.3.36 when missing (cmake and a C++ compiler; ~9 min
# on 2 cores, CPU only). tests/test_llama_server.py measures it; it skips when it is missing.
llama-server: $(STAMP)
	PYTHON=$(BIN)/python scripts/build_llama_server.sh

bench: $(STAMP)
	@for script in benchmarks/bench_*.py; do echo "== $$script"; $(BIN)/python $$script || exit 1; done

# The workshop in a browser tab (README): a static JupyterLite site in site/ (git-ignored) with
# the Pyodide kernel, notebooks 01-08, data/ and the llminfer wheel, all served from the site.
# Its build tools live in .venv-lite/ (git-ignored; requirements-lite.txt says why: not
# requirements.txt, so `make lab` never installs them). Pyodide's numpy/pandas/matplotlib
# wheels come from its CDN, or from WHEELS=DIR (a folder prepared on a connected machine).
LITE_VENV  := .venv-lite
LITE_BIN   := $(LITE_VENV)/bin
LITE_STAMP := $(LITE_VENV)/.installed
WHEELS ?=

$(LITE_STAMP): requirements-lite.txt
	test -x $(LITE_BIN)/python || $(PYTHON) -m venv $(LITE_VENV)
	$(LITE_BIN)/python -m pip install --quiet -r requirements-lite.txt
	touch $(LITE_STAMP)

lite: $(LITE_STAMP)
	$(LITE_BIN)/python scripts/build_lite.py --out site $(if $(WHEELS),--wheels $(WHEELS),)

# On a connected machine: Pyodide's eight WebAssembly wheels (numpy, pandas, matplotlib and theirs,
# pyarrow, duckdb) from its CDN into WHEELS=DIR, checked against the lock, for a
# later `make lite WHEELS=DIR` where the classroom has no internet.
lite-wheels: $(LITE_STAMP)
	@test -n "$(WHEELS)" || { echo "make lite-wheels WHEELS=DIR"; exit 2; }
	$(LITE_BIN)/python scripts/build_lite.py --fetch-wheels $(WHEELS)

# What CI can check of the site here: the build with no network beyond the registries, the site
# on 127.0.0.1 in headless Chromium with every other host blocked (scripts/lite_check.py), and
# notebooks 01-07 run natively under Pyodide's limits (LLMINFER_EMULATE_PYODIDE=1: no threads,
# processes or mmap; llminfer installed from its wheel; Pyodide's package versions; pyarrow and
# duckdb blocked by scripts/lite/sitecustomize.py).
# One BLAS thread per process, as in Pyodide (numpy there has no threads) and as in make test:
# two workers with OpenBLAS's spinning threads on 2 cores slowed notebook 02's timed prefill
# until its "decode is far less efficient per token" check failed (twice in CI dry runs).
test-lite: lite $(STAMP)
	$(BIN)/python scripts/lite_check.py --site site
	$(LITE_BIN)/python -m pip install --quiet --no-deps --force-reinstall build/lite/piplite/llminfer/llminfer-*.whl
	cd build/lite && $(CURDIR)/$(LITE_BIN)/python -c 'import llminfer; assert "site-packages" in llminfer.__file__, llminfer.__file__'
	cd build/lite/src/contents/notebooks && LLMINFER_EMULATE_PYODIDE=1 LLMINFER_PREFETCH=0 \
		$(ONE_BLAS_THREAD) PYTHONPATH=$(CURDIR)/scripts/lite MPLBACKEND=Agg \
		$(CURDIR)/$(LITE_BIN)/python -m pytest -p no:cacheprovider -c /dev/null --rootdir . \
		--nbval --nbval-current-env --nbval-sanitize-with $(CURDIR)/tests/nbval_sanitize.cfg \
		-n 2 --dist loadfile -W ignore::DeprecationWarning 0[1-7]_*.ipynb

clean:
	rm -rf $(VENV) $(LITE_VENV) site .pytest_cache .ruff_cache .hypothesis
