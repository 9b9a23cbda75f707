"""Indexes for the facet predicates on Oracle, one per declared facet.

Why: every structured answer filters RAG_CHUNK with ``JSON_VALUE(c.FACETS,
'$.<name>' ...)`` (``predicates.facet_expression``); without an index on
that expression each answer scans the table. Oracle uses a function-based
index only for a query expression that matches the indexed one, return type
included (Oracle JSON Developer's Guide, "Data Type Considerations for
JSON_VALUE Indexing and Querying": an index without ``RETURNING NUMBER`` is
not picked up for a ``RETURNING NUMBER`` query), and only in a comparison
(``=``, ``IN``, ``<``, ``BETWEEN``), not in ``IS [NOT] NULL`` ("Using a
JSON_VALUE Function-Based Index with JSON_TABLE Queries", note). So the
indexed expression is built from the predicate's own template
(``answers_sql.FACET_TEXT`` / ``FACET_NUMBER``) with the table's column in
place of the alias ``c.``, never written a second time. The error clause
is the default on both sides (NULL ON ERROR): a record whose value does not
convert is left out of the index and out of the answer alike, and never
makes a write fail.

Which facets: those the configured sources declare (the reference sources'
facets and each SQL source's ``facet_columns``); ``oracle-rag migrate`` and
``bootstrap`` create the missing ones. A facet text facet and a numeric one
of the same name get different indexes (``RAG_CHUNK_FT_*`` / ``RAG_CHUNK_FN_*``).
The embedded engine creates none (``Engine.indexes_facets``).
"""

from __future__ import annotations

from collections.abc import Iterable

from oracle_rag.answering.structured.answers_sql import (
    CREATE_FACET_INDEX,
    FACET_EXPRESSION_MARKER,
    FACET_INDEX_NAME_MARKER,
)
from oracle_rag.answering.structured.predicates import facet_expression
from oracle_rag.engines import Engine
from oracle_rag.sources.facets import Facet, check_facet_name
from oracle_rag.sources.meanings import Declaration

ALIAS_COLUMN = "c.FACETS"


def index_name(facet: Facet) -> str:
    return f"RAG_CHUNK_F{'N' if facet.numeric else 'T'}_{check_facet_name(facet.name).upper()}_IX"


def index_expression(facet: Facet) -> str:
    """The facet predicate's Oracle expression on the table's column (the alias dropped)."""
    expression = facet_expression(facet).oracle or ""
    if expression.count(ALIAS_COLUMN) != 1:
        raise ValueError(f"facet expression {expression!r} does not read {ALIAS_COLUMN} once")
    return expression.replace(ALIAS_COLUMN, "FACETS")


def facet_index_ddl(declarations: Iterable[Declaration]) -> list[tuple[str, str]]:
    """(index name, CREATE INDEX statement) per distinct declared facet, in name order."""
    seen: dict[str, str] = {}
    for declaration in declarations:
        for facet in declaration.facets:
            name = index_name(facet)
            seen.setdefault(
                name,
                (CREATE_FACET_INDEX.oracle or "")
                .replace(FACET_INDEX_NAME_MARKER, name)
                .replace(FACET_EXPRESSION_MARKER, index_expression(facet)),
            )
    return sorted(seen.items())


def ensure_facet_indexes(engine: Engine, declarations: Iterable[Declaration]) -> list[str]:
    """Create the missing facet indexes (Oracle); the names of the indexes ensured."""
    if not engine.indexes_facets:
        return []
    done = []
    for name, ddl in facet_index_ddl(declarations):
        with engine.begin() as conn:  # a driver error comes out as a DatabaseError without its text
            engine.prepare_ddl(conn)  # ONLINE waits for the workers' open transactions at its start and end
            conn.exec_driver_sql(ddl)
        done.append(name)
    return done
