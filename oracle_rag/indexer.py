"""Keep RAG_CHUNK equal to the rendered entities, embedding only what changed.

For one batch: load every entity in one query per source type, render them
into records (chunks, record hash, BM25 analysis: records.py), read the
stored state of each record (its chunk 0) in one query, then:

* text changed (or new): embed and write every chunk of the record, drop
  the chunks it no longer has;
* text unchanged, owner/project/sprint or facets changed: rewrite those
  columns on every chunk of the record, no embedding (a reassignment costs
  no model call);
* text unchanged but not yet analysed for BM25 (rows from before the
  migration): store the analysis, no embedding;
* otherwise nothing.

Entities that no longer exist lose all their chunks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa

from .bm25 import Analysis
from .engines import Engine, facets_json
from .errors import SourceLoadingError
from .record_writes import RecordWrite, plan_of, record_write, write_records
from .sources import SourceRegistry


@dataclass
class IndexResult:
    embedded: int = 0  # chunks embedded and written
    unchanged: int = 0  # records skipped: text, scope and facets as stored
    deleted: int = 0  # chunks deleted
    rescoped: int = 0  # records whose scope/facets (or BM25 analysis) were rewritten without embedding
    keys: list[tuple[str, str]] = field(default_factory=list)

    def add(self, other: IndexResult) -> None:
        self.embedded += other.embedded
        self.unchanged += other.unchanged
        self.deleted += other.deleted
        self.rescoped += other.rescoped


class Indexer:
    def __init__(self, engine: Engine, sources: SourceRegistry) -> None:
        self.engine = engine
        self.sources = sources
        self.plan = plan_of(engine.settings)

    def apply(self, conn: sa.Connection, upserts: Iterable[tuple[str, str]], deletes: Iterable[tuple[str, str]] = ()) -> IndexResult:
        """Re-index ``upserts`` and drop the chunks of ``deletes`` (keys are (type, id))."""
        result = IndexResult()
        by_type: dict[str, list[str]] = {}
        # Types are matched ignoring case (queue rows from other applications):
        # chunks are always stored and looked up under the registered spelling.
        for source_type, source_id in upserts:
            ids = by_type.setdefault(self.sources.canonical(source_type), [])
            if str(source_id) not in ids:
                ids.append(str(source_id))
        for source_type, source_id in deletes:
            result.deleted += self.engine.delete_chunks(conn, self.sources.canonical(source_type),
                                                        [str(source_id)])
        for source_type, ids in by_type.items():
            result.add(self._reindex_type(conn, source_type, ids))
        return result

    def reindex(self, conn: sa.Connection, source_type: str, source_id: str) -> IndexResult:
        return self.apply(conn, [(source_type, str(source_id))])

    def delete(self, conn: sa.Connection, source_type: str, source_id: str) -> IndexResult:
        return self.apply(conn, [], [(source_type, str(source_id))])

    def _reindex_type(self, conn: sa.Connection, source_type: str, ids: Sequence[str]) -> IndexResult:
        source = self.sources.get(source_type)
        if source is None:
            raise SourceLoadingError(f"no source registered for type {source_type!r}")
        result = IndexResult()
        docs = source.load_many(conn, ids)
        missing = [i for i in ids if i not in docs]
        if missing:
            result.deleted += self.engine.delete_chunks(conn, source_type, missing)
        if not docs:
            return result
        stored = self.engine.read_chunk_state(conn, source_type, list(docs))
        changed: list[RecordWrite] = []
        rescope: list[tuple[str, str, int | None, int | None, int | None, str]] = []
        analyse: list[tuple[str, str, Analysis]] = []
        for doc in docs.values():
            facets = facets_json(doc.facets)
            record = record_write(self.plan, doc.source_type, doc.source_id, doc.content, owner_id=doc.owner_id,
                                  project_id=doc.project_id, sprint_id=doc.sprint_id, facets=facets)
            old = stored.get(doc.source_id)
            if old is None or old.content_hash != record.record_hash:
                changed.append(record)
                continue
            # Same text: no embedding. An owner/project/sprint/facet change
            # rewrites those columns on every chunk (the access scope must
            # follow the new owner); a row from before BM25 gets its analysis.
            if old.scope != (doc.owner_id, doc.project_id, doc.sprint_id, facets):
                rescope.append((doc.source_type, doc.source_id, doc.owner_id, doc.project_id, doc.sprint_id, facets))
            if not old.analysed and record.chunks[0].analysis is not None:
                analyse.append((doc.source_type, doc.source_id, record.chunks[0].analysis))
            if old.scope == (doc.owner_id, doc.project_id, doc.sprint_id, facets) and old.analysed:
                result.unchanged += 1
            else:
                result.rescoped += 1
        self.engine.rescope(conn, rescope)
        self.engine.write_analyses(conn, analyse)
        result.embedded += write_records(self.engine, conn, changed)
        return result

