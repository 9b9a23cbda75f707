"""The façade tying configuration, engine and the product's parts together."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from oracle_rag.answering.structured.facet_indexes import ensure_facet_indexes
from oracle_rag.callers.access import access_status
from oracle_rag.callers.audit import flush_audit
from oracle_rag.callers.people import PeopleDirectory, people_for, people_status
from oracle_rag.config import Settings, load_settings
from oracle_rag.engines import Engine, create_engine
from oracle_rag.indexing.backfill import BackfillReport, Progress, backfill
from oracle_rag.indexing.indexer import Indexer
from oracle_rag.indexing.model_switch import earlier_builds, switch_progress
from oracle_rag.indexing.queue import enqueue
from oracle_rag.indexing.refresh import SourceRefresher
from oracle_rag.indexing.worker import Worker
from oracle_rag.migrations import MigrationReport, migrate_all
from oracle_rag.search.retriever import Retriever
from oracle_rag.sources import Source, SourceRegistry
from oracle_rag.sources.meanings import Declaration
from oracle_rag.sources.reference import ReferenceRegistry
from oracle_rag.sources.sql_query import SqlSource, load_sql_sources


class RagSystem:
    """One configured product instance: an engine plus the parts built on it."""

    def __init__(
        self, settings: Settings, engine: Engine | None = None, sources: list[Source] | None = None
    ) -> None:
        self.settings = settings
        self.engine = engine or create_engine(settings)
        # Without explicit sources: the reference application's, where its tables
        # exist (sources/reference.py).
        self.sources: SourceRegistry = (
            ReferenceRegistry(self.engine, mode=settings.reference_app)
            if sources is None
            else SourceRegistry(sources)
        )
        self.indexer = Indexer(self.engine, self.sources)
        self._sql_sources: SourceRefresher | None = None
        self.people: PeopleDirectory = people_for(self.engine)  # checks [people] query now

    def migrate(
        self, *, demo: bool = False, progress: Callable[[str], None] | None = None
    ) -> dict[str, MigrationReport]:
        """Apply the migrations, then create the indexes the declared facets need (Oracle)."""
        sets = ("rag", "demo") if demo else ("rag",)
        reports = migrate_all(self.engine, sets, progress)
        if demo:
            self.sources.settle(force=True)
        self.ensure_facet_indexes(progress)
        return reports

    def declarations(self) -> list[Declaration]:
        """What every source declares: the registry's sources and the SQL-query sources."""
        return [s.declaration() for s in self.sources] + [
            s.declaration() for s in self.sql_source_definitions()
        ]

    def ensure_facet_indexes(self, progress: Callable[[str], None] | None = None) -> list[str]:
        """One index per declared facet for the structured answers' predicates
        (answering/structured/facet_indexes.py)."""
        if not self.engine.indexes_facets:
            return []
        names = ensure_facet_indexes(self.engine, self.declarations())
        if names and progress:
            progress(f"facet indexes: {', '.join(names)}")
        return names

    def enqueue(self, conn: Any, source_type: str, source_id: Any, action: str = "UPSERT") -> None:
        enqueue(conn, source_type, source_id, action)

    def worker(self, **kwargs: Any) -> Worker:
        return Worker(self.engine, self.indexer, self.settings, **kwargs)

    def backfill(self, *, all_entities: bool = False, progress: Progress | None = None) -> BackfillReport:
        return backfill(self.engine, self.sources, all_entities=all_entities, progress=progress)

    def sql_sources(self) -> SourceRefresher:
        """The SQL-query sources of ``settings.sources`` (a cached ``SourceRefresher``).

        ``serve`` and ``worker`` refresh them in the background
        (:mod:`oracle_rag.background`); else call ``.refresh_due()``
        periodically, and ``.sync()`` reads every source now; see
        docs/sql-sources.md.
        """
        if self._sql_sources is None:
            self._sql_sources = SourceRefresher(self.engine, load_sql_sources(self.settings))
        return self._sql_sources

    def sql_source_definitions(self) -> list[SqlSource]:
        """The validated SQL-query source definitions (their declared facets feed the question parser)."""
        return load_sql_sources(self.settings)

    def retriever(self) -> Retriever:
        return Retriever(self.engine, self.settings)

    def status(self) -> dict[str, Any]:
        with self.engine.connect() as conn:
            stats = self.engine.queue_stats(conn, self.settings.max_attempts)
            # The error of the oldest failing row: the cause an operator fixes first.
            head = (
                self.engine.list_queue(
                    conn, failed_only=False, max_attempts=self.settings.max_attempts, limit=100
                )
                if stats.depth
                else []
            )
            failures = self.engine.access_failures(conn)
            active = self.engine.active_generation(conn)
        return {
            "engine": self.engine.name,
            "model": self.engine.model_label,
            "active_generation": active.label(),
            "queue_depth": stats.depth,
            "oldest_age_s": stats.oldest_age_s,
            "stalled_rows": stats.stalled,
            "failed_rows": stats.failed,
            "last_error": next((r.last_error for r in head if r.last_error), None),
            "chunks": stats.chunks_by_type,
            # Sources whose permission data failed to read: hidden from callers without see-all (and the
            # error class of each failure; anonymous /healthz shows only their count).
            "access_hidden_sources": sorted(failures),
            "access_hidden_errors": {name: failures[name] for name in sorted(failures)},
            "access": access_status(self.engine),
            "people": people_status(self.engine),
            # A model switch under way (indexing/model_switch.py): how many chunks the new generation has.
            "model_switch": switch_progress(self.engine),
            # A live generation whose model file is of an earlier build: kept, and the commands to move.
            "model_builds": earlier_builds(self.engine, self.settings),
        }

    def close(self) -> None:
        flush_audit(self.engine)  # events recorded by this process reach RAG_AUDIT before the engine goes
        if self._sql_sources is not None:
            self._sql_sources.close()
        self.engine.dispose()

    def __enter__(self) -> RagSystem:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def connect(url: str | None = None, **overrides: Any) -> RagSystem:
    """Build a :class:`RagSystem` from configuration (``url`` overrides ORACLE_RAG_DATABASE_URL)."""
    if url is not None:
        overrides["database_url"] = url
    return RagSystem(load_settings(**overrides))
