"""Keep RAG_CHUNK equal to the rendered entities, embedding only what changed.

For one batch: load every entity in one query per source type, render and
hash them, read the stored hashes in one query, then embed and upsert only
the chunks whose text changed (the engine embeds them inside the database).
Entities that no longer exist lose their chunk. Unchanged text costs no
embedding call, which is what makes re-running backfill --all cheap.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa

from .engines import ChunkWrite, Engine, content_hash, facets_json
from .errors import SourceLoadingError
from .sources import SourceRegistry


@dataclass
class IndexResult:
    embedded: int = 0
    unchanged: int = 0
    deleted: int = 0
    keys: list[tuple[str, str]] = field(default_factory=list)

    def add(self, other: IndexResult) -> None:
        self.embedded += other.embedded
        self.unchanged += other.unchanged
        self.deleted += other.deleted


class Indexer:
    def __init__(self, engine: Engine, sources: SourceRegistry) -> None:
        self.engine = engine
        self.sources = sources

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
        changed: list[ChunkWrite] = []
        for doc in docs.values():
            digest = content_hash(doc.content)
            facets = facets_json(doc.facets)
            # Skip only when the text, the scope columns AND the facets are as
            # stored: an owner change with identical text must not leave the old scope.
            if stored.get(doc.source_id) == (digest, doc.owner_id, doc.project_id, doc.sprint_id, facets):
                result.unchanged += 1
                continue
            changed.append(ChunkWrite(doc.source_type, doc.source_id, doc.content, digest,
                                      doc.owner_id, doc.project_id, doc.sprint_id, facets=facets))
        result.embedded += self.engine.upsert_chunks(conn, changed)
        return result
