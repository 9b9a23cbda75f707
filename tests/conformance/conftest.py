"""The engine conformance suite: the same tests on every available engine.

``engine_kind`` is parametrized over ``sqlite`` (always) and ``oracle`` (marked
``oracle``; skipped with a one-line reason when no Oracle database is
available, see ``tests/oracle_helpers.py``). Three starting states:

* ``empty_system``: not migrated (SQLite: a new file; Oracle: the product's
  tables dropped);
* ``engine_system``: migrated (product + reference schema) and seeded with
  SEED_TASKS deterministic tasks, nothing indexed;
* ``indexed_system``: the same, backfilled and drained.

On SQLite the seeded and indexed states are built once per session and copied
per test, with one shared ONNX runtime, so the suite stays fast; on Oracle
each test rebuilds its state in the one schema.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from model_helpers import link_model
from oracle_helpers import (
    clear_rows,
    fold_skip_report,
    mark_oracle_items_unavailable,
    require_oracle,
    reset_schema,
)

SEED_TASKS = 40
HERE = Path(__file__).resolve().parent


@pytest.hookimpl(tryfirst=True)  # before -m selects: the oracle marker must already be there
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    mark_oracle_items_unavailable([i for i in items if HERE in Path(str(i.fspath)).parents])


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    fold_skip_report(outcome.get_result())  # type: ignore[attr-defined]


@pytest.fixture(params=["sqlite", pytest.param("oracle", marks=pytest.mark.oracle)])
def engine_kind(request: pytest.FixtureRequest) -> str:
    return request.param


def _sqlite_system(data_dir: Path, runtime: Any) -> Any:
    from oracle_rag.config import load_settings
    from oracle_rag.system import RagSystem

    config = data_dir / "empty.toml"
    config.write_text("")
    system = RagSystem(load_settings(env={}, config_file=config, data_dir=str(data_dir)))
    system.engine.set_runtime(runtime)  # type: ignore[attr-defined]
    return system


@pytest.fixture(scope="session")
def sqlite_runtime(model_path: Path) -> Any:
    from oracle_rag.embedding import EmbeddingRuntime

    return EmbeddingRuntime(model_path)


@pytest.fixture(scope="session")
def sqlite_templates(
    tmp_path_factory: pytest.TempPathFactory, model_path: Path, sqlite_runtime: Any
) -> dict[str, Path]:
    """SQLite files in the ``seeded`` and ``indexed`` states, built once."""
    from oracle_rag.demo.seed import seed

    build = tmp_path_factory.mktemp("conformance-template")
    link_model(model_path, build)
    system = _sqlite_system(build, sqlite_runtime)
    system.migrate(demo=True)
    seed(system.engine, SEED_TASKS)
    system.close()
    out = {"seeded": build / "seeded.db"}
    shutil.copyfile(build / "oracle-rag.db", out["seeded"])
    system = _sqlite_system(build, sqlite_runtime)
    system.backfill()
    result = system.worker().drain()
    assert result.failed_rows == 0, result.errors
    system.close()
    out["indexed"] = build / "indexed.db"
    shutil.copyfile(build / "oracle-rag.db", out["indexed"])
    return out


def _system(request: pytest.FixtureRequest, kind: str, tmp_path: Path, state: str) -> Any:
    from oracle_rag.demo.seed import seed
    from oracle_rag.errors import MigrationError
    from oracle_rag.system import RagSystem

    data_dir = tmp_path / "data"
    if kind == "sqlite":
        runtime = request.getfixturevalue("sqlite_runtime")
        link_model(request.getfixturevalue("model_path"), data_dir)
        if state != "empty":
            shutil.copyfile(request.getfixturevalue("sqlite_templates")[state], data_dir / "oracle-rag.db")
        return _sqlite_system(data_dir, runtime)
    target = require_oracle(request)  # skips or fails here, before any model build
    system = RagSystem(target.settings(data_dir))
    if state == "empty":
        reset_schema(system.engine)
        return system
    try:
        system.migrate(demo=True)
    except MigrationError:  # a schema left by an older checkout of the migrations
        reset_schema(system.engine)
        system.migrate(demo=True)
    clear_rows(system.engine)  # the schema outlives a test on Oracle
    seed(system.engine, SEED_TASKS)
    if state == "indexed":
        system.backfill()
        result = system.worker().drain()
        assert result.failed_rows == 0, result.errors
    return system


@pytest.fixture
def empty_system(engine_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    system = _system(request, engine_kind, tmp_path, "empty")
    yield system
    system.close()


@pytest.fixture
def engine_system(engine_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    system = _system(request, engine_kind, tmp_path, "seeded")
    yield system
    system.close()


@pytest.fixture
def indexed_system(engine_kind: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    system = _system(request, engine_kind, tmp_path, "indexed")
    yield system
    system.close()
