"""The access scope of the guarded aggregate views, generated from the one scope predicate.

Model-written SQL reads allow-listed views over the application's tables
(``answering/aggregate/catalog.py``). A view's rows must follow the same declared
policy as every other read path (docs/access.md): a row of a declared
source is visible when the caller sees all (``see_all_roles``) or when its
record's chunk passes ``scope_sql.scope_predicate`` (owner, groups, public,
failed permission data) with the caller read from the guarded session
instead of binds (a view takes no binds):

* SQLite: functions registered on the guarded connection only
  (``answering/aggregate/sqlite_executor.py``): ``rag_caller_id()``,
  ``rag_caller_see_all()``, ``rag_caller_groups()`` (a JSON array, expanded
  by ``json_each``); the authorizer refuses them outside a view's body.
* Oracle: the read-only user cannot set an application context (it may
  not run the schema's package), so the product's own session writes the
  caller to ``RAG_GUARDED_CALLER`` / ``RAG_GUARDED_GROUP`` under an
  unguessable token, the read-only session sets ``CLIENT_IDENTIFIER`` to
  that token, and the views (owned by the schema, read with its rights) read
  the row; the read-only user has no grant on the two tables. No row (no
  token, an unknown or a finished one): the views are empty (fail closed).

Migrations name the predicate with a placeholder that the engine fills at
migrate time (``render``): ``{{RAG_RECORD_VISIBLE:<SOURCE_TYPE>:<key
expression>}}`` for a view over a declared source (the key is the
expression giving the record's source id, e.g. ``t.TASK_ID``) and
``{{RAG_CALLER_KNOWN}}`` for a view over rows that no source declares (any
authenticated caller). A row not yet indexed is visible to see-all
callers only, as in search.
"""

from __future__ import annotations

import re

from oracle_rag.engines.scope_sql import CallerSql, scope_predicate

_SOURCE = re.compile(r"^[A-Z][A-Z0-9_]{0,63}$")
_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,29}\.[A-Za-z][A-Za-z0-9_]{0,127}$")
PLACEHOLDER = re.compile(r"\{\{RAG_RECORD_VISIBLE:([^:{}]*):([^{}]*)\}\}|\{\{RAG_CALLER_KNOWN\}\}")

_TOKEN = "SYS_CONTEXT('USERENV', 'CLIENT_IDENTIFIER')"
_ORACLE_ME = f"SELECT 1 FROM RAG_GUARDED_CALLER rag_me WHERE rag_me.TOKEN = {_TOKEN}"


def caller_known(dialect: str) -> str:
    """True when the guarded session carries a caller."""
    if dialect == "sqlite":
        return "rag_caller_id() IS NOT NULL"
    return f"EXISTS ({_ORACLE_ME})"


def guarded_caller(dialect: str) -> CallerSql:
    """The guarded session's caller as SQL expressions (no binds: a view takes none)."""
    if dialect == "sqlite":
        return CallerSql(
            "rag_caller_id()",
            "rag_caller_see_all()",
            "(SELECT rag_g.value FROM json_each(rag_caller_groups()) rag_g)",
        )
    return CallerSql(
        _oracle_caller("CALLER_ID"),
        _oracle_caller("SEE_ALL"),
        f"(SELECT rag_g.PRINCIPAL FROM RAG_GUARDED_GROUP rag_g WHERE rag_g.TOKEN = {_TOKEN})",
    )


def _oracle_caller(column: str) -> str:
    return f"(SELECT rag_me.{column} FROM RAG_GUARDED_CALLER rag_me WHERE rag_me.TOKEN = {_TOKEN})"


def record_visible(dialect: str, source_type: str, key: str) -> str:
    """True when the caller may see the record ``(source_type, key)`` under its source's declared policy.

    The visible records of the source are one non-correlated subquery (read
    once per query from RAG_CHUNK's chunk-0 rows, every column the scope
    needs in one covering index on SQLite), and each row is a probe of that
    set: a correlated probe of RAG_CHUNK per row read each chunk's row (its
    text and vector with it) and cost 24x the old fixed rule at 19,200 tasks.
    """
    if not _SOURCE.match(source_type) or not _KEY.match(key):
        raise ValueError("a guarded view's source type must be an upper-case name and its key alias.column")
    caller = guarded_caller(dialect)
    record = f"CAST({key} AS TEXT)" if dialect == "sqlite" else f"TO_CHAR({key})"
    scope = scope_predicate("rag_chunk", caller)
    visible = (
        f"SELECT rag_chunk.SOURCE_ID FROM RAG_CHUNK rag_chunk WHERE rag_chunk.SOURCE_TYPE = '{source_type}' "
        f"AND rag_chunk.CHUNK_NO = 0 AND {scope}"
    )
    return f"({caller_known(dialect)} AND ({caller.see_all} = 1 OR {record} IN ({visible})))"


def render(script: str, dialect: str) -> str:
    """``script`` with every guarded-view placeholder replaced by ``dialect``'s predicate."""

    def fill(match: re.Match[str]) -> str:
        if match.group(0) == "{{RAG_CALLER_KNOWN}}":
            return caller_known(dialect)
        return record_visible(dialect, match.group(1), match.group(2))

    return PLACEHOLDER.sub(fill, script)
