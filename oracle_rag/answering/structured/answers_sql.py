"""Every statement the structured answerer sends: records, counts, groups, one record, facet values.

Each runs over RAG_CHUNK with the one scope predicate (``engine_sql.SCOPE``,
the text every search statement carries) and the facet predicate of
``answers.predicates`` in the where marker (``engine.statement(sql, where)``).
One row per record: chunk 0 carries the record's scope and facets like every
chunk of it.

Composition: :data:`GROUP_MARKER` is replaced by a facet expression built
from a declared facet name (:func:`grouped`); the where marker by the
predicate, whose values are all binds. Nothing else is formatted in. The
markers are valid SQL, so the templates parse as they are.
"""

from __future__ import annotations

from dataclasses import replace

from oracle_rag.engines.engine_sql import SCOPE, SCOPE_JOIN, SCOPE_JOINED, over_visible_chunks
from oracle_rag.engines.statements import Sql

GROUP_MARKER = "/* group */ c.FACETS"

# How each engine reads a facet from the FACETS JSON object ({path} is '$.<name>'); fragments.
FACET_TEXT = Sql(oracle="JSON_VALUE(c.FACETS, '{path}')", sqlite="json_extract(c.FACETS, '{path}')")
FACET_NUMBER = Sql(
    oracle="JSON_VALUE(c.FACETS, '{path}' RETURNING NUMBER)", sqlite="json_extract(c.FACETS, '{path}')"
)

# An index per declared facet on Oracle (answering/structured/facet_indexes.py): the
# expression marker becomes the facet's Oracle expression above with the
# table's own column, so it is the predicate's expression exactly (a
# function-based index is used only for the same expression and return type);
# the name marker a name built from the checked facet name. Oracle 23ai's IF
# NOT EXISTS makes a re-run a no-op. ONLINE: "DML operations on the table will
# be allowed during creation of the index" (CREATE INDEX), so a newly declared
# facet does not fail a deploy with ORA-00054 while workers write RAG_CHUNK
# (the build waits for their open transactions instead). The markers are
# valid SQL, so the template parses as it is.
FACET_INDEX_NAME_MARKER = "RAG_CHUNK_FACET_IX"
FACET_EXPRESSION_MARKER = "/* facet */ FACETS"
CREATE_FACET_INDEX = Sql(
    oracle=f"CREATE INDEX IF NOT EXISTS {FACET_INDEX_NAME_MARKER} "
    f"ON RAG_CHUNK ({FACET_EXPRESSION_MARKER}) ONLINE"
)

# Oracle: the statements over every record the caller may see take the scope's
# joined group test (engine_sql.SCOPE_JOIN: no FILTER over the ACL per record).
_RECORDS = f"""SELECT c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT, c.FACETS
FROM RAG_CHUNK c {SCOPE_JOIN}
WHERE c.CHUNK_NO = 0
  AND {SCOPE_JOINED}
  AND /* where */ 1 = 1
ORDER BY c.SOURCE_TYPE, LENGTH(c.SOURCE_ID), c.SOURCE_ID"""
# SQLite: the ids first, from the facet indexes alone, then the text of those few records (sorting
# every match with its text read a 2 KB row per match: 0.7 s for 2,000 matches of 100,000 records).
_RECORDS_BY_INDEX = f"""SELECT c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT, c.FACETS
FROM RAG_CHUNK c
WHERE c.CHUNK_ID IN (SELECT c.CHUNK_ID
                     FROM RAG_CHUNK c
                     WHERE c.CHUNK_NO = 0
                       AND {SCOPE}
                       AND /* where */ 1 = 1
                     ORDER BY c.SOURCE_TYPE, LENGTH(c.SOURCE_ID), c.SOURCE_ID
                     LIMIT :limit)
ORDER BY c.SOURCE_TYPE, LENGTH(c.SOURCE_ID), c.SOURCE_ID"""
LIST_RECORDS = Sql(sqlite=_RECORDS_BY_INDEX, oracle=_RECORDS + "\nFETCH FIRST :limit ROWS ONLY")

COUNT_RECORDS = over_visible_chunks("""SELECT COUNT(*)
FROM RAG_CHUNK c {scope_join}
WHERE c.CHUNK_NO = 0
  AND {scope}
  AND /* where */ 1 = 1""")

COUNT_GROUPS = over_visible_chunks("""SELECT /* group */ c.FACETS AS GROUP_VALUE, COUNT(*) AS N
FROM RAG_CHUNK c {scope_join}
WHERE c.CHUNK_NO = 0
  AND {scope}
  AND /* where */ 1 = 1
GROUP BY /* group */ c.FACETS
ORDER BY N DESC""")

# One record by id, all its chunks: a record the caller may not see reads as absent.
CHUNKS_OF_ONE = Sql.both(f"""SELECT c.SOURCE_TYPE, c.SOURCE_ID, c.CHUNK_NO, c.CONTENT, c.FACETS
FROM RAG_CHUNK c
WHERE c.SOURCE_TYPE = :source_type
  AND c.SOURCE_ID = :source_id
  AND {SCOPE}
ORDER BY c.CHUNK_NO""")

# Chunk 0 of records found by ranked search (their first lines and facets).
RECORDS_BY_ID = Sql.both(
    f"""SELECT c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT, c.FACETS
FROM RAG_CHUNK c
WHERE c.CHUNK_NO = 0
  AND c.SOURCE_TYPE = :source_type
  AND c.SOURCE_ID IN :ids
  AND {SCOPE}""",
    expanding=("ids",),
)

# The values of an enum facet among the records the caller may see (the vocabulary).
FACET_VALUES = over_visible_chunks(
    """SELECT DISTINCT /* group */ c.FACETS AS V
FROM RAG_CHUNK c {scope_join}
WHERE c.CHUNK_NO = 0
  AND c.SOURCE_TYPE IN :types
  AND {scope}""",
    expanding=("types",),
)


def grouped(sql: Sql, expression: Sql) -> Sql:
    """``sql`` with each engine's facet expression in place of the group marker."""
    return replace(
        sql,
        oracle=(sql.oracle or "").replace(GROUP_MARKER, expression.oracle or ""),
        sqlite=(sql.sqlite or "").replace(GROUP_MARKER, expression.sqlite or ""),
    )


# An index per facet for the embedded engine: a count, a GROUP BY or a filter on a facet reads the
# index instead of every record's row (whose vector and text make a scan of 100,000 records take
# seconds; bench/answers_scale.py). ``{name}`` is RAG_CHUNK_FACET_<facet>_X and ``{expr}`` the facet's
# expression without the table alias, both from a declared facet name (check_facet_name). On Oracle
# no index is made at run time, so the statement is a no-op: its facet indexes are made by `oracle-rag
# migrate` / `bootstrap` (CREATE_FACET_INDEX above, answering/structured/facet_indexes.py).
FACET_INDEX = Sql(
    oracle="SELECT 1 FROM dual",
    sqlite="CREATE INDEX IF NOT EXISTS {name} ON RAG_CHUNK (CHUNK_NO, {expr}, SOURCE_TYPE, ACCESS_PUBLIC, "
    "ACCESS_OWNER, SOURCE_ID, FACETS)",
)


def facet_index(name: str, expression: Sql) -> Sql:
    """:data:`FACET_INDEX` for one facet (``expression``: :func:`predicates.facet_expression`)."""
    sqlite = (expression.sqlite or "").replace("c.FACETS", "FACETS")
    return replace(
        FACET_INDEX,
        sqlite=(FACET_INDEX.sqlite or "")
        .replace("{name}", f"RAG_CHUNK_FACET_{name.upper()}_X")
        .replace("{expr}", sqlite),
    )
