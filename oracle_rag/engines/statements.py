"""The one statement mechanism: every statement as each engine writes it, chosen by the engine.

A ``*_sql.py`` module declares its statements as module-level :class:`Sql`
constants: ``Sql.both(text)`` when Oracle and SQLite agree (written once),
``Sql(oracle=..., sqlite=...)`` when they differ, one side only for a
statement that exists on one engine. Only an engine picks the text
(:meth:`oracle_rag.engines.Engine.statement`), so no caller ever asks which
engine it runs on, and the golden tests find every Oracle statement by
looking for ``Sql`` objects (``tests/statements_helpers.py``).

Nothing is formatted into a statement here; binds are ``:named``. The one
template, ``{model}`` in Oracle embedding statements, is filled by the Oracle
engine after validating the name as an identifier.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import sqlalchemy as sa


@dataclass(frozen=True)
class Sql:
    """One statement: its Oracle and SQLite text, its expanding binds and CLOB binds.

    ``expanding`` names ``IN :name`` binds that SQLAlchemy expands into a
    list; ``clobs`` names binds Oracle must receive as CLOB (long text that
    would otherwise be cut at the VARCHAR2 limit). SQLite has no such type.
    """

    oracle: str | None = None
    sqlite: str | None = None
    expanding: tuple[str, ...] = ()
    clobs: tuple[str, ...] = ()

    @classmethod
    def both(cls, text: str, *, expanding: tuple[str, ...] = (), clobs: tuple[str, ...] = ()) -> Sql:
        """A statement both engines send with the same text."""
        return cls(text, text, expanding, clobs)


class ClobBind(sa.types.UserDefinedType[str]):
    """A bind sent as ``DB_TYPE_CLOB`` (python-oracledb makes a temporary LOB of the str).

    ``sa.Text()`` is not enough: SQLAlchemy's oracledb dialect maps it to
    ``DB_TYPE_NVARCHAR`` (``_OracleText.get_dbapi_type``), and python-oracledb
    sends a string longer than the server's VARCHAR2 limit as LONG, which
    Oracle accepts into a LOB column for INSERT ... VALUES and UPDATE ... SET
    but not through MERGE (ORA-01461, python-oracledb issue #467 uses the same
    ``DB_TYPE_CLOB`` cure). ``DB_TYPE_CLOB`` is in the dialect's
    ``include_set_input_sizes``, so it reaches ``cursor.setinputsizes``;
    ``tests/test_oracle_lobs.py`` checks that. Other drivers ignore it
    (SQLite gets the str as is).
    """

    cache_ok = True

    def get_col_spec(self, **_kw: Any) -> str:
        return "CLOB"

    def get_dbapi_type(self, dbapi: Any) -> Any:
        return getattr(dbapi, "DB_TYPE_CLOB", None)


# The caller's groups in the scope predicate (engine_sql.SCOPE): every statement
# that composes the predicate gets it as an expanding bind without declaring it.
SCOPE_GROUPS_BIND = re.compile(r":access_groups\b")


@lru_cache(maxsize=512)
def stmt(sql: str, expanding: tuple[str, ...] = (), clobs: tuple[str, ...] = ()) -> sa.TextClause:
    """A cached ``text()`` with expanding list binds and CLOB-typed binds."""
    if "access_groups" not in expanding and SCOPE_GROUPS_BIND.search(sql):
        expanding = (*expanding, "access_groups")
    clause = sa.text(sql)
    params: list[sa.BindParameter[Any]] = [sa.bindparam(name, expanding=True) for name in expanding]
    params += [sa.bindparam(name, type_=ClobBind()) for name in clobs]
    return clause.bindparams(*params) if params else clause


def for_connection(conn: sa.Connection, sql: Sql) -> sa.TextClause:
    """``sql`` for a connection the caller owns (``queue.enqueue`` in a host app's transaction).

    The one place outside an :class:`Engine` that chooses a text: the caller
    hands over a bare SQLAlchemy connection, so its dialect decides.
    """
    dialect = conn.dialect.name
    text = sql.oracle if dialect == "oracle" else sql.sqlite if dialect == "sqlite" else None
    if text is None:
        raise TypeError(f"oracle-rag supports Oracle and SQLite connections, not {dialect}")
    return stmt(text, sql.expanding, sql.clobs if dialect == "oracle" else ())
