# Every command of the book; `make` alone (or `make help`) lists them with how long each takes.
# Times are those of a busy 2-core build machine (Nov 2026); the README says more.

.DEFAULT_GOAL := help

# The first Python >= 3.12 found (jax 0.12 needs it); override with `make PYTHON=/path/to/python3.12`.
PYTHON ?= $(shell for p in python3.12 python3.13 python3 $$(ls -d $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3 2>/dev/null); do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && echo $$p && break; done)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
KERNEL_CONFIG := $(VENV)/etc/ipython/ipython_kernel_config.py
# The venv's Quarto (quarto-cli) first, then one on PATH; empty when there is none.
QUARTO = $(firstword $(wildcard $(VENV)/bin/quarto) $(shell command -v quarto 2>/dev/null))

.PHONY: help setup quarto book pdf notebooks test test-fast sections preview serve lab bench classroom handout lab-student grade clean

# Each target's `## text` comment is its line in `make help`.
help:  ## this list (the default goal)
	@echo "make TARGET [VAR=value]: what each does, and about how long it takes on a busy 2-core machine."
	@echo "JITBOOK_SMALL=1 (e.g. 'make book JITBOOK_SMALL=1') runs every chapter at the tests' small sizes."
	@echo ""
	@awk -F':.*## ' '/^[a-z][a-z-]*:.*## / { printf "  make %-12s %s\n", $$1, $$2 }' $(MAKEFILE_LIST)
	@echo ""
	@echo "Options go in variables, not after the target: 'make ledger LEDGER_ARGS=--help' shows the"
	@echo "ledger's options, 'make bench BENCH_ARGS=--help' the benchmark's ('make ledger --help' is make's own help)."

setup: $(STAMP) $(KERNEL_CONFIG)  ## build .venv from requirements.lock (5-10 min the first time; then nothing)

# The kernels of the venv read it: no ipykernel warning on every page Quarto executes (see the file).
$(KERNEL_CONFIG): filters/ipython_kernel_config.py $(STAMP)
	@mkdir -p $(dir $@) && cp $< $@

$(STAMP): requirements.lock pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.12 or newer is needed (jax 0.12 requires it); pass PYTHON=/path/to/python3.12"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e .
	@$(MAKE) --no-print-directory quarto
	@touch $(STAMP)

# Quarto for the site, pinned in requirements-site.txt. quarto-cli's installer fetches Quarto's release,
# so it needs the internet; without it, setup goes on and says how else to get the site.
quarto:  ## install Quarto into .venv from PyPI (needs the internet; about 1 min)
	@if [ -n "$(QUARTO)" ]; then echo "Quarto: using $(QUARTO) ($$($(QUARTO) --version))"; \
	elif $(PY) -m pip install --quiet -r requirements-site.txt >/dev/null 2>&1; then \
		echo "Quarto: installed $$(grep -m1 '^quarto-cli' requirements-site.txt) into $(VENV)"; \
	else \
		echo "Quarto: skipped (quarto-cli's installer needs the internet to fetch Quarto's release)."; \
		echo "  The chapters still run: 'make notebooks', 'make lab', 'make test'. For the site, get Quarto"; \
		echo "  with 'conda env create -f environment.yml' (conda-forge's quarto) or from quarto.org,"; \
		echo "  then run 'make book' again."; \
	fi

notebooks: setup  ## execute every chapter into _build/notebooks/ (about 20 min; 4.5 min small)
	$(PY) -m jitbook.site run --all

# One execution per build: with Quarto, `quarto render` executes each chapter once and its post-render step
# (filters/post-render.py) writes the downloads; without Quarto, the harness executes them.
book: setup  ## execute every chapter and render the site into _book/ (about 25 min; 5 min small)
	@if [ -n "$(QUARTO)" ]; then \
		echo "quarto render: each line is stamped with the time since it started."; \
		QUARTO_PYTHON=$(PY) $(PY) -m jitbook.site timed $(QUARTO) render && \
		echo "The book is in _book/. Read it with 'make serve' (http://127.0.0.1:$(PORT)/); opening the files directly breaks search and scripts."; \
	else \
		$(PY) -m jitbook.site run --all && \
		echo "" && \
		echo "Quarto is not installed, so the site was not rendered." && \
		echo "Get it with 'conda env create -f environment.yml' (conda-forge's quarto) or 'make quarto' (quarto-cli from PyPI; needs the internet), then run 'make book' again and read it with 'make serve'." && \
		echo "The executed chapters are in _build/notebooks/: open them with 'make lab'."; \
	fi

# The whole book as one PDF, _build/pdf/JIT-with-JAX.pdf (the site's sidebar links its copy in _book/; a
# render into _book itself would replace the site), made by Typst through
# Quarto (the `pdf` profile, _quarto-pdf.yml). Quarto executes the chapters once per output format, so
# this runs every chapter again (as long as `make book` takes); explorers print as their figure and table.
pdf: setup  ## the whole book as one PDF in _build/pdf/ (runs every chapter again: about 25 min)
	@test -n "$(QUARTO)" || { echo "Quarto is not installed: 'make quarto' or conda-forge's quarto (environment.yml), then 'make pdf'."; exit 1; }
	@$(QUARTO) typst --version >/dev/null 2>&1 || { echo "Quarto's Typst is missing: Quarto's releases (quarto.org, PyPI quarto-cli, conda-forge quarto) bundle it; a Quarto built without it needs 'typst' on PATH (e.g. https://github.com/typst/typst/releases)."; exit 1; }
	@echo "quarto render (PDF): each line is stamped with the time since it started."
	QUARTO_PYTHON=$(PY) $(PY) -m jitbook.site timed $(QUARTO) render --profile pdf --to typst --output-dir _build/pdf
	@mkdir -p _book && cp _build/pdf/JIT-with-JAX.pdf _book/
	@echo "The PDF is _build/pdf/JIT-with-JAX.pdf, copied into the site (_book/), where every 'make book' puts it again."

# Quarto sites are read over HTTP: the standard library serves _book/ on this machine only.
PORT ?= 8000
serve:  ## serve _book/ at http://127.0.0.1:8000/ until Ctrl-C (another port: PORT=8001)
	@test -f _book/index.html || { echo "No site in _book/: run 'make book' first (it needs Quarto)."; exit 1; }
	@case '$(PORT)' in ''|*[!0-9]*) echo "PORT=$(PORT) is not a port number: give a number from 1024 to 65535, e.g. 'make serve PORT=8001'."; exit 2;; esac
	@$(PY) -c "import socket; socket.create_server(('127.0.0.1', $(PORT))).close()" 2>/dev/null || \
		{ echo "Port $(PORT) is taken (another 'make serve'?): stop that server or pick another port, e.g. 'make serve PORT=8001'."; exit 1; }
	@echo "Serving the book at http://127.0.0.1:$(PORT)/ (Ctrl-C stops it)"
	$(PY) -m http.server $(PORT) --bind 127.0.0.1 --directory _book

# JupyterLab (installed from requirements.lock) on the book's executed chapters, solutions included (students
# use 'make lab-student'): the config in
# _build/jupyter hides nbgrader's instructor tools. Jupyter refuses to run as root unless told, so as root
# this passes --allow-root and says so.
LAB_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root)
lab: setup  ## JupyterLab on _build/notebooks/ until Ctrl-C (first runs `make notebooks` if empty)
	@test -n "$$(ls _build/notebooks/*.ipynb 2>/dev/null)" || $(MAKE) notebooks
	@$(PY) -m jitbook.classroom lab-config _build/jupyter >/dev/null
	@if [ -n "$(LAB_ROOT)" ]; then echo "Running as root: JupyterLab starts with --allow-root."; fi
	JUPYTER_CONFIG_DIR=_build/jupyter $(PY) -m jupyter lab _build/notebooks $(LAB_ROOT)

test: setup  ## the whole test suite, every chapter at small sizes (about 10 min)
	$(PY) -m pytest

sections: setup  ## every chapter's sections run alone, their quoted counts compared, caches probed (why-compile alone: 4 min)
	JITBOOK_SECTIONS=1 $(PY) -m pytest tests/test_cold.py

# The fast loop: everything but the chapter runs (and the tests that read executed chapters).
test-fast: setup  ## the suite without executing any chapter (under 10 min)
	$(PY) -m pytest -m "not chapter"

preview: setup  ## quarto preview until Ctrl-C: re-renders a page as you edit it (first render ~25 min)
	@test -n "$(QUARTO)" || { echo "Quarto is not installed: 'make quarto' or conda-forge's quarto (environment.yml)."; exit 1; }
	QUARTO_PYTHON=$(PY) $(QUARTO) preview

classroom: setup  ## student and instructor notebooks in _build/classroom/ (under 1 min; 4.5 min more when chapters must run)
	$(PY) -m jitbook.classroom notebooks _build/classroom
	@echo "Student and instructor notebooks are in _build/classroom/ (see the 'For teachers' page)."

# What students get: the student notebooks only (no solutions), values from a small-size run.
handout: setup  ## the student notebooks only, in _build/handout/ (as make classroom: 1-6 min)
	$(PY) -m jitbook.classroom notebooks _build/handout --students-only
	@echo "The handout (no solutions) is in _build/handout/student/; students open it with 'make lab-student'."

# JupyterLab on the handout, as students use it (make lab opens the book's chapters, solutions included).
lab-student: setup  ## JupyterLab on the handout until Ctrl-C (first runs `make handout` if empty)
	@test -n "$$(ls _build/handout/student/*.ipynb 2>/dev/null)" || $(MAKE) handout
	@$(PY) -m jitbook.classroom lab-config _build/jupyter >/dev/null
	@if [ -n "$(LAB_ROOT)" ]; then echo "Running as root: JupyterLab starts with --allow-root."; fi
	JUPYTER_CONFIG_DIR=_build/jupyter $(PY) -m jupyter lab _build/handout/student $(LAB_ROOT)

# Grade a folder of completed notebooks: make grade SUBMISSIONS=path/to/folder (grades in _build/grades/), one notebook
# per core at once on a local Dask cluster; GRADE_ARGS="--scheduler tcp://host:8786", "--workers 4", "--resume".
grade: setup  ## grade SUBMISSIONS=folder of notebooks into _build/grades/ (1-3 min a notebook, one per core at once)
	@test -n "$(SUBMISSIONS)" || { echo "make grade needs the folder of submissions: make grade SUBMISSIONS=path/to/folder"; exit 2; }
	@test -d "$(SUBMISSIONS)" || { echo "make grade SUBMISSIONS=$(SUBMISSIONS): no folder there; give the folder that holds the submitted notebooks."; exit 2; }
	$(PY) -m jitbook.classroom grade "$(SUBMISSIONS)" $(GRADE_ARGS)

clean:  ## remove what the build wrote (_build, _book, .quarto); instant
	rm -rf _build _book .quarto *.quarto_ipynb* chapters/*.quarto_ipynb* site_libs

# The claim ledger (the "Ledger of claims" appendix): every claim test on 11 chosen JAX releases, 0.4.18 to the lock,
# one venv per release under ~/.cache/jitbook-ledger; resumable; releases run at once on a local Dask cluster (one per
# core) or on LEDGER_ARGS="--scheduler tcp://host:8786". Options: LEDGER_ARGS="--only-missing".
.PHONY: ledger ledger-check canary
ledger: setup  ## claim tests on 11 JAX releases, ~100 min, resumable (options: LEDGER_ARGS=--help)
	$(PY) -m jitbook.ledger $(LEDGER_ARGS)

# What CI runs: `make test` needs each claim's row on the locked release only and warns about older ones.
ledger-check: setup  ## fail when a claim has no result on some release of the ledger (about 1 min)
	$(PY) -m jitbook.ledger --check

# The newest JAX and jaxlib the index offers, in a scratch venv: which claims change against the lock.
canary: setup  ## claim tests on the newest JAX (downloads ~600 MB; about 7 min)
	$(PY) -m jitbook.ledger --canary

# The benchmarks print tables; options through BENCH_ARGS, e.g. `make bench BENCH_ARGS="--iters 20"`.
bench: setup  ## the PLN benchmark, python -m jitbook.bench pln (--iters 20: 3 min; BENCH_ARGS=--help)
	$(PY) -m jitbook.bench pln $(BENCH_ARGS)
