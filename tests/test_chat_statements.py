"""The chat statements and the V3 migration, checked without an Oracle database.

Every statement is an ``Sql`` with Oracle text (what the golden test module
discovers), has a SQLite twin with the same binds, uses only ``:named``
binds, and the chunk-detail statement carries the engines' own scope
predicate. The Oracle V3 script splits into the statements we expect.
"""

from __future__ import annotations

import re
from pathlib import Path

import sqlalchemy as sa
import sqlglot

from oracle_rag.answering.chat import chat_sql
from oracle_rag.engines import Sql, engine_sql
from oracle_rag.sql_scripts import split_oracle_script

SQL_DIR = Path(chat_sql.__file__).resolve().parents[3] / "sql"
_BIND = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")
ORACLE_STATEMENTS = {n: v.oracle for n, v in vars(chat_sql).items() if isinstance(v, Sql)}
SQLITE_STATEMENTS = {n: v.sqlite for n, v in vars(chat_sql).items() if isinstance(v, Sql)}


def _binds(sql: str) -> set[str]:
    return set(_BIND.findall(re.sub(r"'[^']*'", "''", sql)))


def test_every_oracle_constant_is_exposed() -> None:
    for name, value in vars(chat_sql).items():
        if name.isupper() and not name.startswith("_") and name != "SCOPE":
            assert isinstance(value, Sql) and value.oracle, f"{name} is not an Sql with Oracle text"


def test_both_engines_have_the_same_statements_and_binds() -> None:
    assert set(ORACLE_STATEMENTS) == set(SQLITE_STATEMENTS)
    for name, oracle in ORACLE_STATEMENTS.items():
        sqlite = SQLITE_STATEMENTS[name]
        assert oracle is not None and sqlite is not None, name
        assert _binds(oracle) == _binds(sqlite), name
        assert "?" not in oracle and "%s" not in oracle and "{" not in oracle, name
        assert not oracle.rstrip().endswith(";"), name  # python-oracledb refuses a trailing semicolon


def test_chunk_detail_uses_the_search_scope_predicate() -> None:
    assert chat_sql.GET_CHUNK.oracle and chat_sql.GET_CHUNK.oracle.endswith(engine_sql.SCOPE)
    assert chat_sql.GET_CHUNK.sqlite and chat_sql.GET_CHUNK.sqlite.endswith(engine_sql.SCOPE)
    assert {"see_all", "caller_id", "access_groups", "source_type", "source_id"} == _binds(
        chat_sql.GET_CHUNK.oracle
    )


def test_oracle_statements_parse_as_their_kind() -> None:
    for name, sql in ORACLE_STATEMENTS.items():
        assert sql is not None
        tree = sqlglot.parse_one(sql, read="oracle")
        kind = sql.split(None, 1)[0].upper()
        assert type(tree).__name__.upper() == kind, (name, type(tree).__name__)


def test_oracle_v3_script_splits_into_its_statements() -> None:
    script = (SQL_DIR / "oracle" / "V3__chat.sql").read_text("utf-8")
    statements = split_oracle_script(script)
    heads = [" ".join(s.split()[:3]) for s in statements]
    assert heads == [
        "CREATE TABLE RAG_CONVERSATION",
        "CREATE INDEX RAG_CONVERSATION_OWNER_IX",
        "CREATE TABLE RAG_MESSAGE",
        "CREATE INDEX RAG_MESSAGE_CONVERSATION_IX",
        "CREATE TABLE RAG_API_TOKEN",
        "CREATE INDEX RAG_API_TOKEN_EMPLOYEE_IX",
    ]
    assert all(not s.rstrip().endswith(";") for s in statements)
    assert "CHECK (CITATIONS IS JSON)" in script and "ON DELETE CASCADE" in script


def test_sqlite_v3_applies_and_enforces_its_constraints(rag) -> None:
    query = rag.engine.statement
    with rag.engine.begin() as conn:
        tables = {r[0] for r in conn.exec_driver_sql("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"RAG_CONVERSATION", "RAG_MESSAGE", "RAG_API_TOKEN"} <= tables
        conn.execute(
            query(chat_sql.INSERT_CONVERSATION), {"conversation_id": "a" * 32, "employee_id": 9, "title": "t"}
        )
        for bad in ({"role": "system", "citations": None}, {"role": "user", "citations": "{not json"}):
            try:
                with conn.begin_nested():
                    conn.execute(
                        query(chat_sql.INSERT_MESSAGE),
                        {
                            "conversation_id": "a" * 32,
                            "content": "x",
                            "understood": None,
                            "guarded_sql": None,
                            **bad,
                        },
                    )
            except sa.exc.IntegrityError:
                continue
            raise AssertionError(f"accepted {bad}")
        try:
            with conn.begin_nested():
                conn.execute(
                    query(chat_sql.INSERT_MESSAGE),
                    {
                        "conversation_id": "b" * 32,
                        "role": "user",
                        "content": "x",
                        "citations": None,
                        "understood": None,
                        "guarded_sql": None,
                    },
                )
        except sa.exc.IntegrityError:
            pass
        else:
            raise AssertionError("a message without its conversation was accepted")
