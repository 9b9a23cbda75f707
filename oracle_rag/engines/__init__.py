"""The engine seam: the Engine interface, what crosses it, and the one choice of engine."""

from __future__ import annotations

from oracle_rag.config import Settings
from oracle_rag.engines.base import Engine
from oracle_rag.engines.records import (
    ChunkWrite,
    Filters,
    Hit,
    KeywordHits,
    QueueRow,
    QueueStats,
    RecordAccess,
    Run,
    Scope,
    SemanticHits,
    StoredRecord,
    Where,
    content_hash,
    embed_text,
    facets_json,
    facets_value,
)
from oracle_rag.engines.statements import Sql

__all__ = [
    "ChunkWrite",
    "Engine",
    "Filters",
    "Hit",
    "KeywordHits",
    "QueueRow",
    "QueueStats",
    "RecordAccess",
    "Run",
    "Scope",
    "SemanticHits",
    "Sql",
    "StoredRecord",
    "Where",
    "content_hash",
    "create_engine",
    "embed_text",
    "facets_json",
    "facets_value",
]


def create_engine(settings: Settings) -> Engine:
    """``SqliteEngine`` when no database URL is configured, else ``OracleEngine``.

    Each engine module is imported only when chosen: the embedded one loads
    sqlite-vec, which imports the standard library's sqlite3 (a second SQLite
    binding next to sqlean, tests/test_sql_scripts.py) and numpy; the Oracle one
    loads the tracing hooks for its sessions.
    """
    if settings.engine_kind == "oracle":
        from oracle_rag.engines.oracle.engine import OracleEngine

        return OracleEngine(settings)
    from oracle_rag.engines.sqlite.engine import SqliteEngine

    return SqliteEngine(settings)
