"""Knowledge sources: the reference application's entities and SQL-query sources."""

from .base import Document, Source, SourceRegistry
from .connections import bind_connection
from .reference import ProjectSource, SprintSource, TaskSource, reference_sources
from .refresh import SourceRefresher, SourceResult
from .sql_query import SqlSource, load_sql_sources

__all__ = ["Document", "ProjectSource", "Source", "SourceRefresher", "SourceRegistry", "SourceResult",
           "SprintSource", "SqlSource", "TaskSource", "bind_connection", "load_sql_sources",
           "reference_sources"]
