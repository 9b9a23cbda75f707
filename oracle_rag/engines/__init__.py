"""Engine selection: one choice, made once, from configuration."""

from __future__ import annotations

from ..config import Settings
from .base import (
    ChunkWrite,
    Engine,
    Filters,
    Hit,
    QueueRow,
    QueueStats,
    Scope,
    Where,
    content_hash,
    embed_text,
    facets_json,
    facets_value,
)

__all__ = ["ChunkWrite", "Engine", "Filters", "Hit", "QueueRow", "QueueStats", "Scope", "Where", "content_hash",
           "create_engine", "embed_text", "facets_json", "facets_value"]


def create_engine(settings: Settings) -> Engine:
    """``SqliteEngine`` when no database URL is configured, else ``OracleEngine``."""
    if settings.engine_kind == "oracle":
        from .oracle import OracleEngine

        return OracleEngine(settings)
    from .sqlite import SqliteEngine

    return SqliteEngine(settings)
