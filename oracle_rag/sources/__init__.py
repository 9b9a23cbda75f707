"""Knowledge sources: the reference application's entities and SQL-query sources."""

from .base import Document, Source, SourceRegistry
from .reference import ProjectSource, SprintSource, TaskSource, reference_sources

__all__ = ["Document", "ProjectSource", "Source", "SourceRegistry", "SprintSource", "TaskSource",
           "reference_sources"]
