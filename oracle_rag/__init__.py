"""oracle-rag: in-database retrieval-augmented generation for Oracle AI Vector Search.

``connect()`` is the front door: it reads configuration, picks the engine
(embedded SQLite when no database URL is set, Oracle otherwise) and returns
a :class:`RagSystem` that can migrate, enqueue, run the worker, search and
chat.
"""

from __future__ import annotations

from oracle_rag.errors import RagError
from oracle_rag.system import RagSystem, connect

__version__ = "0.1.0"
__all__ = ["RagError", "RagSystem", "__version__", "connect"]
