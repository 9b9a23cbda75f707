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

The decision and the writes are two steps: :meth:`Indexer.plan` reads
(sources and stored state) and decides, :meth:`Indexer.write` writes. The
worker on the embedded engine plans and embeds outside the write
transaction and writes in a short one (indexing/worker.py); ``apply`` does both on
one connection.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import sqlalchemy as sa

from oracle_rag.engines import RecordAccess, StoredRecord, facets_json
from oracle_rag.engines.indexed_columns import indexed_values
from oracle_rag.engines.roles import ChunkStore
from oracle_rag.errors import SourceLoadingError
from oracle_rag.indexing.record_writes import RecordWrite, planned_hash, record_write, write_records
from oracle_rag.sources import SourceRegistry
from oracle_rag.sources.access import record_access
from oracle_rag.text.bm25 import Analysis, analyze_record
from oracle_rag.text.chunking import plan_of


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


Key = tuple[str, str]  # (registered source type, source id)
Rescope = tuple[str, str, int | None, tuple[int | None, ...], str, RecordAccess]


@dataclass
class IndexPlan:
    """What re-indexing a set of keys will write, decided from one read of the sources and RAG_CHUNK.

    ``stored`` is the state each loaded record had when the plan was made
    (None: no chunk yet); a writer in another transaction re-reads it to see
    whether someone wrote the record since (:meth:`Indexer.stored_now`).
    """

    deletes: list[Key] = field(
        default_factory=list
    )  # records whose chunks go (DELETE rows, vanished entities)
    changed: list[RecordWrite] = field(default_factory=list)  # text changed: embed and write
    rescope: list[Rescope] = field(default_factory=list)
    analyse: list[tuple[str, str, Analysis]] = field(default_factory=list)
    unchanged: int = 0
    rescoped: int = 0
    stored: dict[Key, StoredRecord | None] = field(default_factory=dict)

    def texts(self) -> list[str]:
        """The contents to embed: every chunk of every changed record (each model generation embeds
        them as its passages, ``Engine.embed_texts``)."""
        return [c.content for r in self.changed for c in r.chunks]

    def written(self) -> set[Key]:
        """The loaded records this plan writes something for (text, scope or analysis)."""
        return (
            {(r.source_type, r.source_id) for r in self.changed}
            | {(r[0], r[1]) for r in self.rescope}
            | {(a[0], a[1]) for a in self.analyse}
        )

    def only(self, keys: Collection[Key]) -> IndexPlan:
        """The part of the plan about ``keys``."""
        wanted = set(keys)
        plan = IndexPlan(
            deletes=[k for k in self.deletes if k in wanted],
            changed=[r for r in self.changed if (r.source_type, r.source_id) in wanted],
            rescope=[r for r in self.rescope if (r[0], r[1]) in wanted],
            analyse=[a for a in self.analyse if (a[0], a[1]) in wanted],
            stored={k: v for k, v in self.stored.items() if k in wanted},
        )
        changed = {(r.source_type, r.source_id) for r in plan.changed}
        touched = {(r[0], r[1]) for r in plan.rescope} | {(a[0], a[1]) for a in plan.analyse}
        plan.rescoped = len(touched)
        plan.unchanged = sum(1 for k in plan.stored if k not in changed and k not in touched)
        return plan


class Indexer:
    def __init__(self, engine: ChunkStore, sources: SourceRegistry) -> None:
        self.engine = engine
        self.sources = sources
        self.plan_settings = plan_of(engine.settings)

    def key(self, source_type: str, source_id: str) -> Key:
        """A queue key as the plan names it: the registered spelling of the type (queue rows
        from other applications may use another case)."""
        return (self.sources.canonical(source_type), str(source_id))

    def apply(
        self, conn: sa.Connection, upserts: Iterable[tuple[str, str]], deletes: Iterable[tuple[str, str]] = ()
    ) -> IndexResult:
        """Re-index ``upserts`` and drop the chunks of ``deletes`` (keys are (type, id))."""
        return self.write(conn, self.plan(conn, upserts, deletes))

    def reindex(self, conn: sa.Connection, source_type: str, source_id: str) -> IndexResult:
        return self.apply(conn, [(source_type, str(source_id))])

    def delete(self, conn: sa.Connection, source_type: str, source_id: str) -> IndexResult:
        return self.apply(conn, [], [(source_type, str(source_id))])

    def plan(
        self, conn: sa.Connection, upserts: Iterable[tuple[str, str]], deletes: Iterable[tuple[str, str]] = ()
    ) -> IndexPlan:
        """Load, render and compare with the stored state; reads only."""
        plan = IndexPlan()
        by_type: dict[str, list[str]] = {}
        for source_type, source_id in upserts:
            canonical, sid = self.key(source_type, source_id)
            ids = by_type.setdefault(canonical, [])
            if sid not in ids:
                ids.append(sid)
        for source_type, source_id in deletes:
            plan.deletes.append(self.key(source_type, source_id))
        for source_type, ids in by_type.items():
            self._plan_type(conn, plan, source_type, ids)
        return plan

    def write(
        self, conn: sa.Connection, plan: IndexPlan, vectors: Mapping[int, Mapping[str, bytes]] | None = None
    ) -> IndexResult:
        """Carry out ``plan``; ``vectors`` (``Engine.embed_texts`` of ``plan.texts()``) or embed in SQL."""
        result = IndexResult(unchanged=plan.unchanged, rescoped=plan.rescoped)
        by_type: dict[str, list[str]] = {}
        for source_type, source_id in plan.deletes:
            by_type.setdefault(source_type, []).append(source_id)
        for source_type, ids in by_type.items():
            result.deleted += self.engine.delete_chunks(conn, source_type, ids)
        self.engine.rescope(conn, plan.rescope)
        self.engine.write_analyses(conn, plan.analyse)
        result.embedded += write_records(self.engine, conn, plan.changed, vectors)
        return result

    def stored_now(self, conn: sa.Connection, plan: IndexPlan) -> dict[Key, StoredRecord | None]:
        """The stored state of the loaded records the plan writes, read again (compare with ``plan.stored``).

        A record the plan leaves as it is needs no second look: writing
        nothing cannot write it stale, and a change made since has its own
        queue row.
        """
        by_type: dict[str, list[str]] = {}
        for source_type, source_id in plan.written() & plan.stored.keys():
            by_type.setdefault(source_type, []).append(source_id)
        now: dict[Key, StoredRecord | None] = {}
        for source_type, ids in by_type.items():
            found = self.engine.read_chunk_state(conn, source_type, ids)
            now.update({(source_type, i): found.get(i) for i in ids})
        return now

    def _plan_type(self, conn: sa.Connection, plan: IndexPlan, source_type: str, ids: Sequence[str]) -> None:
        source = self.sources.get(source_type)
        if source is None:
            raise SourceLoadingError(f"no source registered for type {source_type!r}")
        docs = source.load_many(conn, ids)
        plan.deletes.extend((source_type, i) for i in ids if i not in docs)
        if not docs:
            return
        stored = self.engine.read_chunk_state(conn, source_type, list(docs))
        for doc in docs.values():
            facets = facets_json(doc.facets)
            indexed = indexed_values(doc.facets, source.indexed_facets())
            access = record_access(source.access, doc.owner_id, doc.groups)
            planned = planned_hash(self.plan_settings, doc.content)
            old = stored.get(doc.source_id)
            plan.stored[(source_type, doc.source_id)] = old
            if old is None or old.content_hash != planned[1]:
                plan.changed.append(
                    record_write(
                        self.plan_settings,
                        doc.source_type,
                        doc.source_id,
                        doc.content,
                        owner_id=doc.owner_id,
                        indexed=indexed,
                        facets=facets,
                        access=access,
                        planned=planned,
                    )
                )
                continue
            # Same text: no embedding. An owner/facet/access change rewrites those
            # columns on every chunk (the access scope must follow the new owner or
            # groups); a row from before BM25 gets its analysis.
            scope = (doc.owner_id, indexed, facets, access)
            if old.scope != scope:
                plan.rescope.append((doc.source_type, doc.source_id, *scope))
            if not old.analysed:
                plan.analyse.append((doc.source_type, doc.source_id, analyze_record(doc.content)))
            if old.scope == scope and old.analysed:
                plan.unchanged += 1
            else:
                plan.rescoped += 1
