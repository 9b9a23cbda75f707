"""Shared pytest fixtures."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest
from model_helpers import link_model


# --- embedding model (oracle_rag.embedding) ---------------------------------
# One build per test session (~2 s, ~90 MB in a tmp dir). Set
# ORACLE_RAG_TEST_MODEL to an already built file to skip the build.
@pytest.fixture(scope="session")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of an augmented all-MiniLM-L6-v2 ONNX file, built once per session."""
    from oracle_rag.embedding import DEFAULT_MODEL_FILENAME, build_model

    preset = os.environ.get("ORACLE_RAG_TEST_MODEL")
    if preset:
        path = Path(preset)
        if not path.is_file():
            raise pytest.UsageError(f"ORACLE_RAG_TEST_MODEL={preset} does not exist")
        return path
    return build_model(tmp_path_factory.mktemp("embedding-model") / DEFAULT_MODEL_FILENAME)


# --- engines and demo data (shared by write path, read path, web tests) ------
@pytest.fixture
def data_dir(tmp_path: Path, model_path: Path) -> Path:
    """A fresh data directory that already holds the session's model file."""
    d = tmp_path / "data"
    link_model(model_path, d)
    return d


@pytest.fixture
def make_settings(data_dir: Path):
    """Build validated Settings for the embedded engine in ``data_dir`` (env ignored)."""
    from oracle_rag.config import load_settings

    def make(**overrides):
        overrides.setdefault("data_dir", str(data_dir))
        return load_settings(env={}, **overrides)

    return make


@pytest.fixture
def rag(make_settings):
    """A migrated (product + reference schema) embedded RagSystem with no data."""
    from oracle_rag.system import RagSystem

    system = RagSystem(make_settings())
    system.migrate(demo=True)
    yield system
    system.close()


DEMO_TASKS = 300
# The day the demo data is dated around (demo/seed.py): fixed, so every run sees the same rows;
# tests/test_answers.py asks its date questions ("overdue", "this week") on this day.
DEMO_DAY = dt.date(2026, 3, 11)


@pytest.fixture(scope="session")
def demo_template(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Path:
    """A SQLite file migrated, seeded with DEMO_TASKS tasks and fully indexed, built once."""
    from oracle_rag.config import load_settings
    from oracle_rag.demo.seed import seed
    from oracle_rag.system import RagSystem

    d = tmp_path_factory.mktemp("demo-template")
    link_model(model_path, d)
    system = RagSystem(load_settings(env={}, data_dir=str(d)))
    system.migrate(demo=True)
    seed(system.engine, DEMO_TASKS, today=DEMO_DAY)
    system.backfill()
    system.worker().drain()
    system.close()
    return d / "oracle-rag.db"


@pytest.fixture
def demo_rag(demo_template: Path, data_dir: Path, make_settings):
    """An indexed demo RagSystem on a private copy of the template database."""
    import shutil

    from oracle_rag.system import RagSystem

    shutil.copyfile(demo_template, data_dir / "oracle-rag.db")
    system = RagSystem(make_settings())
    yield system
    system.close()


# --- the two ways in: the command line and the web app ----------------------
@pytest.fixture
def cli(data_dir: Path):
    """Run ``oracle-rag ARGS`` in-process (click's CliRunner) on the embedded engine in ``data_dir``.

    The caller's ``ORACLE_RAG_*`` variables are ignored; keyword arguments
    become settings (``cli("status", max_attempts=3)``), ``env=`` adds
    variables (None unsets one). Returns click's ``Result``.
    """
    from click.testing import CliRunner

    from oracle_rag.cli import main

    def run(
        *args: object,
        env: dict[str, str | None] | None = None,
        input: str | None = None,  # noqa: A002
        **settings: object,
    ):
        full: dict[str, str | None] = {k: None for k in os.environ if k.startswith("ORACLE_RAG_")}
        full["ORACLE_RAG_DATA_DIR"] = str(data_dir)
        full.update({f"ORACLE_RAG_{key.upper()}": str(value) for key, value in settings.items()})
        full.update(env or {})
        return CliRunner().invoke(main, [str(a) for a in args], env=full, input=input)

    return run


@pytest.fixture
def client(demo_rag):
    """A Flask test client of the app serving the indexed demo system, extractive answers (no LLM)."""
    from oracle_rag.web import create_app

    return create_app({"ORACLE_RAG_SYSTEM": demo_rag, "ORACLE_RAG_LLM": None}).test_client()
