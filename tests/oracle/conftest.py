"""Fixtures for the Oracle-only integration tests (everything here is marked ``oracle``).

``oracle_url`` comes from ``ORACLE_RAG_TEST_URL`` (+ ``ORACLE_RAG_TEST_PASSWORD``)
or a testcontainers ``gvenzl/oracle-free:23.26.3-faststart`` with an
application user; without either, every test here is skipped with one line
(see ``tests/oracle_helpers.py`` and ``docs/oracle-testing.md``). The session
fixture provisions the database the way local/README.md does (the container
runs local/init/01_users.sh; ``oracle-rag migrate``; ``oracle-rag model load``);
see ``tests/oracle_helpers.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oracle_helpers import (
    OracleTarget,
    clear_rows,
    cli,
    fold_skip_report,
    mark_oracle_items_unavailable,
    new_system,
    require_oracle,
    reset_schema,
)

HERE = Path(__file__).resolve().parent
SEED_TASKS = 40


@pytest.hookimpl(tryfirst=True)  # before -m selects: the oracle marker must already be there
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # Marked here rather than with a module-level pytestmark, so the skip report folds to one line.
    mine = [i for i in items if HERE in Path(str(i.fspath)).parents]
    for item in mine:
        item.add_marker(pytest.mark.oracle)
    mark_oracle_items_unavailable(mine)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    fold_skip_report(outcome.get_result())  # type: ignore[attr-defined]


@pytest.fixture(scope="session")
def oracle_target(request: pytest.FixtureRequest) -> OracleTarget:
    """The provisioned database (model loaded), once per session."""
    return require_oracle(request)


@pytest.fixture(scope="session")
def oracle_url(oracle_target: OracleTarget) -> str:
    """``oracle+oracledb://user@host:port/?service_name=...``; the password is in ``oracle_target.password_env``."""
    return oracle_target.url


@pytest.fixture
def oracle_system(oracle_target: OracleTarget, tmp_path: Path) -> Iterator[Any]:
    """A RagSystem on a freshly migrated schema (product + reference), seeded, nothing indexed.

    The schema comes from ``oracle-rag migrate --demo``, the command local/README.md gives.
    """
    from oracle_rag.demo.seed import seed

    system = new_system(oracle_target, tmp_path)
    reset_schema(system.engine)
    cli(oracle_target, ["migrate", "--demo"], tmp_path / "cli")
    clear_rows(system.engine)
    seed(system.engine, SEED_TASKS)
    yield system
    system.close()
