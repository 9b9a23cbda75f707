"""Small pieces both engines share: statement building and row mapping."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import sqlalchemy as sa

from ..errors import InputError
from .base import Filters, Hit, QueueRow, Scope, Where, facets_value


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


@lru_cache(maxsize=256)
def stmt(sql: str, expanding: tuple[str, ...] = (), clobs: tuple[str, ...] = ()) -> sa.TextClause:
    """A cached ``text()`` with expanding list binds and CLOB-typed binds."""
    clause = sa.text(sql)
    params: list[sa.BindParameter[Any]] = [sa.bindparam(name, expanding=True) for name in expanding]
    params += [sa.bindparam(name, type_=ClobBind()) for name in clobs]
    return clause.bindparams(*params) if params else clause


def read_lob(value: Any) -> Any:
    """The one LOB reader: a LOB object's content, anything else unchanged.

    The Oracle engine's connections fetch CLOB/BLOB as str/bytes (see
    :func:`oracle_rag.engines.oracle.output_type_handler`), so this matters
    only for a connection someone else configured (a host application's
    engine passed to a SQL source, ``auto_convert_lobs=False``).
    """
    if value is not None and not isinstance(value, str | bytes) and callable(getattr(value, "read", None)):
        return value.read()
    return value


def lob_text(value: Any) -> str:
    """A CLOB column as text (``""`` for NULL)."""
    value = read_lob(value)
    return "" if value is None else str(value)


def search_binds(scope: Scope, filters: Filters, where: Where | None = None, **extra: Any) -> dict[str, Any]:
    types = list(filters.source_types)
    binds = {
        **(dict(where.binds) if where is not None else {}),
        **scope.binds(),
        **filters.binds(),
        "f_all_types": 0 if types else 1,
        "f_types": types or ["-"],
    }
    binds.update(extra)
    return binds


def hits(rows: Sequence[Any]) -> list[Hit]:
    return [
        Hit(
            chunk_id=int(r[0]),
            source_type=r[1],
            source_id=str(r[2]),
            content=lob_text(r[3]),
            score=float(r[4]),
            owner_id=None if r[5] is None else int(r[5]),
            project_id=None if r[6] is None else int(r[6]),
            sprint_id=None if r[7] is None else int(r[7]),
            chunk_no=int(r[8]),
            facets=facets_value(r[9]),
        )
        for r in rows
    ]


def queue_rows(rows: Sequence[Any]) -> list[QueueRow]:
    return [
        QueueRow(
            dirty_id=int(r[0]),
            source_type=r[1],
            source_id=str(r[2]),
            action=r[3],
            attempts=int(r[4]),
            enqueued_at=r[5],
            last_error=r[6],
        )
        for r in rows
    ]


def chunk_params(chunks: Sequence[Any]) -> list[dict[str, Any]]:
    return [
        {
            "source_type": c.source_type,
            "source_id": c.source_id,
            "owner_id": c.owner_id,
            "project_id": c.project_id,
            "sprint_id": c.sprint_id,
            "chunk_no": c.chunk_no,
            "facets": c.facets,
            "content": c.content,
            "embed_text": c.embed_text,
            "content_hash": c.content_hash,
        }
        for c in chunks
    ]


def enqueue_params(items: Iterable[tuple[str, Any, str]]) -> list[dict[str, Any]]:
    """Queue rows as binds for the ENQUEUE statement; the action is validated."""
    return [{"source_type": t, "source_id": str(i), "action": check_action(a)} for t, i, a in items]


def check_action(action: str) -> str:
    upper = str(action).upper()
    if upper not in ("UPSERT", "DELETE"):
        raise InputError(f"action must be UPSERT or DELETE, got {action!r}")
    return upper


def vector_values(value: Any) -> list[float]:
    """A stored/returned vector as floats: SQLite gives a float32 blob, Oracle an array."""
    if isinstance(value, bytes | bytearray | memoryview):
        import numpy as np

        return np.frombuffer(bytes(value), dtype="<f4").astype(float).tolist()
    return [float(v) for v in value]
