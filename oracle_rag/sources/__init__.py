"""Knowledge sources: the reference application's entities and SQL-query sources."""

from oracle_rag.sources.base import Document, Source, SourceRegistry
from oracle_rag.sources.connections import bind_connection
from oracle_rag.sources.reference import ProjectSource, SprintSource, TaskSource, reference_sources
from oracle_rag.sources.sql_query import SqlSource, load_sql_sources

__all__ = [
    "Document",
    "ProjectSource",
    "Source",
    "SourceRegistry",
    "SprintSource",
    "SqlSource",
    "TaskSource",
    "bind_connection",
    "load_sql_sources",
    "reference_sources",
]
