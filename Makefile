# The two commands of the README: `make book` and `make test`. Everything runs in .venv, built from requirements.lock.

# The first Python >= 3.12 found (jax 0.12 needs it); override with `make PYTHON=/path/to/python3.12`.
PYTHON ?= $(shell for p in python3.12 python3.13 python3 $$(ls -d $$HOME/.pyenv/versions/3.1[2-9]*/bin/python3 2>/dev/null); do \
	$$p -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null && echo $$p && break; done)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: setup book notebooks test preview bench classroom clean

setup: $(STAMP)

$(STAMP): requirements.lock pyproject.toml
	@test -n "$(PYTHON)" || { echo "Python 3.12 or newer is needed (jax 0.12 requires it); pass PYTHON=/path/to/python3.12"; exit 1; }
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e .
	@touch $(STAMP)

notebooks: setup
	$(PY) -m jitbook.book run --all

book: notebooks
	@if command -v quarto >/dev/null 2>&1; then \
		QUARTO_PYTHON=$(PY) quarto render && $(PY) -m jitbook.book copy-notebooks _book && \
		echo "The book is in _book/: open _book/index.html"; \
	else \
		echo ""; \
		echo "Quarto is not installed, so the site was not rendered."; \
		echo "Get it with 'conda env create -f environment.yml' (conda-forge's quarto) or 'pip install quarto-cli' (needs internet), then run 'make book' again."; \
		echo "The executed chapters are in _build/notebooks/: open them with '$(PY) -m jupyter lab _build/notebooks' or any Jupyter."; \
	fi

test: setup
	$(PY) -m pytest

preview: setup
	QUARTO_PYTHON=$(PY) quarto preview

classroom: setup
	$(PY) -m jitbook.classroom notebooks _build/classroom
	@echo "Student and instructor notebooks are in _build/classroom/ (see the 'For teachers' page)."

clean:
	rm -rf _build _book .quarto
