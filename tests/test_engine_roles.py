"""Both engines play every flow's role (engines/roles.py); only the embedded one is a candidate index.

mypy checks the signatures where system.py hands the engine to each flow; this
checks the engines themselves, the way a third engine would be checked: every
member of a role is there, and each method takes the role's parameters by the
same names, kinds and defaults (a flow may pass any of them by keyword).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from oracle_rag.config import Settings, load_settings
from oracle_rag.engines import Engine
from oracle_rag.engines.roles import (
    CandidateIndex,
    ChunkStore,
    QueueStore,
    Searcher,
    WorkerStore,
    candidate_index,
)
from oracle_rag.engines.sqlite.engine import SqliteEngine

ROLES = [Searcher, ChunkStore, QueueStore, WorkerStore]
# An address nothing listens on: the Oracle engine is built (its pool is made lazily), never connected.
ORACLE_URL = "oracle+oracledb://scott@127.0.0.1:1/?service_name=FREEPDB1"


def _settings(tmp_path: Path, **overrides: Any) -> Settings:
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    return load_settings(env={}, config_file=empty, data_dir=str(tmp_path / "data"), **overrides)


@pytest.fixture
def sqlite_engine(tmp_path: Path) -> Iterator[SqliteEngine]:
    engine = SqliteEngine(_settings(tmp_path))
    yield engine
    engine.dispose()


@pytest.fixture
def oracle_engine(tmp_path: Path) -> Iterator[Engine]:
    pytest.importorskip("oracledb")
    from oracle_rag.engines.oracle.engine import OracleEngine

    engine = OracleEngine(_settings(tmp_path, database_url=ORACLE_URL))
    yield engine
    engine.dispose()


def _members(role: type) -> list[str]:
    """The role's own and inherited protocol members (what ``isinstance`` checks)."""
    attrs = getattr(role, "__protocol_attrs__", None)  # Python 3.12
    if attrs is None:
        attrs = typing._get_protocol_attrs(role)  # type: ignore[attr-defined]  # noqa: SLF001
    return sorted(attrs)


def _parameters(function: Any) -> list[tuple[str, Any, Any]]:
    """(name, kind, default) of each parameter but ``self``: what a caller may rely on."""
    signature = inspect.signature(function)
    return [(p.name, p.kind, p.default) for p in signature.parameters.values() if p.name != "self"]


def _same_shape(role: type, engine: Engine) -> list[str]:
    """The members of ``role`` that ``engine`` lacks or takes differently."""
    wrong = []
    for name in _members(role):
        if not hasattr(engine, name):
            wrong.append(f"{name}: missing")
            continue
        declared = inspect.getattr_static(role, name, None)
        if not inspect.isfunction(declared):
            continue  # an attribute or property: present is all a role asks
        given = inspect.getattr_static(type(engine), name)
        if isinstance(given, staticmethod | classmethod):
            given = given.__func__
        if _parameters(declared) != _parameters(given):
            wrong.append(f"{name}: {_parameters(given)} where the role says {_parameters(declared)}")
    return wrong


@pytest.mark.parametrize("role", ROLES, ids=[r.__name__ for r in ROLES])
def test_the_embedded_engine_plays_every_role(role: type, sqlite_engine: SqliteEngine) -> None:
    assert isinstance(sqlite_engine, role)
    assert _same_shape(role, sqlite_engine) == []


@pytest.mark.parametrize("role", ROLES, ids=[r.__name__ for r in ROLES])
def test_the_oracle_engine_plays_every_role(role: type, oracle_engine: Engine) -> None:
    assert isinstance(oracle_engine, role)
    assert _same_shape(role, oracle_engine) == []


def test_only_the_embedded_engine_is_a_candidate_index(
    sqlite_engine: SqliteEngine, oracle_engine: Engine
) -> None:
    assert isinstance(sqlite_engine, CandidateIndex)
    assert _same_shape(CandidateIndex, sqlite_engine) == []
    assert candidate_index(sqlite_engine) is sqlite_engine
    assert not isinstance(oracle_engine, CandidateIndex)
    assert candidate_index(oracle_engine) is None
    # The capability is not on the seam: an engine has it by its own methods, not by inheriting stubs.
    assert not any(hasattr(Engine, name) for name in _members(CandidateIndex))


def test_a_role_missing_a_method_is_seen() -> None:
    """The shape check fails for an engine that lacks a member or renames a parameter."""

    class Partial:
        def connect(self) -> None: ...

        def semantic_search(self, conn: Any, text: str) -> list[Any]:
            return []

    wrong = _same_shape(Searcher, Partial())  # type: ignore[arg-type]
    assert not isinstance(Partial(), Searcher)
    assert any(w.startswith("keyword_search: missing") for w in wrong)
    assert any(w.startswith("semantic_search: ") and "missing" not in w for w in wrong)
