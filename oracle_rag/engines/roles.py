"""What each flow needs from a database, as its own small protocol (the roles an engine plays).

:class:`~oracle_rag.engines.base.Engine` implements every role; each flow is
typed against the few methods it calls, so a reader (or a third engine) sees
what a flow depends on without reading the whole seam, and mypy checks at each
call site that the engine given plays the role (tests/test_engine_roles.py checks
both engines against each one, names and defaults):

* :class:`Searcher`: the read path (search/: the retriever, hybrid search).
* :class:`ChunkStore`: the chunks and their access, postings and stored state
  (indexing/indexer.py, indexing/record_writes.py).
* :class:`QueueStore`: the queue of records to re-index and what fills it
  (indexing/backfill.py, the worker).
* :class:`WorkerStore`: the worker: the queue, the chunks it hides after a
  failure, prepared batches and the fill of a new model generation's vectors.

:class:`CandidateIndex` is an optional capability, not a role every engine
plays: an engine with in-process indexes (the embedded one) proposes hybrid's
legs without a SQL re-check of each candidate. Hybrid asks once whether the
engine has it (:func:`candidate_index`); Oracle does not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol, cast, runtime_checkable

import sqlalchemy as sa

from oracle_rag.config import Settings
from oracle_rag.engines.generations import Generation
from oracle_rag.engines.records import (
    ChunkWrite,
    Filters,
    Hit,
    KeywordHits,
    QueueRow,
    QueueStats,
    RecordAccess,
    Scope,
    SemanticHits,
    StoredRecord,
    Where,
)
from oracle_rag.text.bm25 import Analysis


@runtime_checkable
class Searcher(Protocol):
    """The read path's use of a database: both legs, and the text of the records a search shows.

    Every method applies the caller's scope in SQL, before the top-k.
    """

    def connect(self) -> AbstractContextManager[sa.Connection]: ...

    def semantic_search(
        self,
        conn: sa.Connection,
        query: str,
        k: int,
        scope: Scope,
        filters: Filters,
        exact: bool = False,
        where: Where | None = None,
        text: bool = True,
    ) -> list[Hit]: ...

    def keyword_search(
        self,
        conn: sa.Connection,
        query: str,
        k: int,
        scope: Scope,
        filters: Filters,
        where: Where | None = None,
        text: bool = True,
    ) -> list[Hit]: ...

    def shown_chunks(
        self,
        conn: sa.Connection,
        chunk_ids: Sequence[int],
        best: Sequence[tuple[int, float]],
        terms: Mapping[str, int],
        weights: Mapping[str, float],
        scope: Scope,
        filters: Filters,
        where: Where | None = None,
        lengths: Mapping[int, int] | None = None,
    ) -> tuple[dict[int, tuple[str, dict[str, Any]]], list[Hit], bool]: ...


@runtime_checkable
class CandidateIndex(Protocol):
    """In-process indexes that propose hybrid's two legs without a SQL re-check of each candidate.

    A proposal is keys and scores ranked over the same visible set as SQL
    (the scope and filters applied as masks), to be shown only through
    :meth:`Searcher.shown_chunks`, which re-applies the scope. None: the index
    cannot answer now (not loaded, switched off, unusable): the caller runs
    the checked legs. When the re-check of the records shown finds one gone,
    hidden or changed, the caller calls :meth:`reject_proposals` (the indexes
    repair those entries) and runs the checked legs. A semantic proposal may
    leave runs of near ties open (:class:`SemanticHits`), which SQL settles on
    demand (``SemanticHits.settle``).
    """

    def propose_semantic(
        self, conn: sa.Connection, query: str, k: int, scope: Scope, filters: Filters
    ) -> SemanticHits | None: ...

    def propose_keyword(
        self, conn: sa.Connection, query: str, k: int, scope: Scope, filters: Filters
    ) -> KeywordHits | None: ...

    def reject_proposals(self, legs: Mapping[str, Sequence[Hit]]) -> None: ...


def candidate_index(engine: object) -> CandidateIndex | None:
    """``engine`` as a :class:`CandidateIndex`, or None when it has none.

    Asked of the engine's class, once per class: a runtime protocol check
    looks up each method on every call, which a search need not pay.
    """
    cls = engine.__class__
    known = _CANDIDATE_INDEXES.get(cls)
    if known is None:
        known = _CANDIDATE_INDEXES[cls] = issubclass(cls, CandidateIndex)
    return cast(CandidateIndex, engine) if known else None


_CANDIDATE_INDEXES: dict[type, bool] = {}


@runtime_checkable
class ChunkStore(Protocol):
    """The chunks of indexed records: what is stored per record, and writing, re-scoping and
    deleting them inside the caller's transaction (the indexer decides what to write)."""

    @property
    def settings(self) -> Settings: ...

    def read_chunk_state(
        self, conn: sa.Connection, source_type: str, ids: Sequence[str]
    ) -> dict[str, StoredRecord]: ...

    def upsert_chunks(
        self,
        conn: sa.Connection,
        chunks: Sequence[ChunkWrite],
        vectors: Mapping[int, Mapping[str, bytes]] | None = None,
    ) -> int: ...

    def trim_chunks(self, conn: sa.Connection, counts: Sequence[tuple[str, str, int]]) -> int: ...

    def delete_chunks(self, conn: sa.Connection, source_type: str, ids: Sequence[str]) -> int: ...

    def rescope(self, conn: sa.Connection, records: Sequence[tuple[Any, ...]]) -> int: ...

    def write_analyses(self, conn: sa.Connection, records: Sequence[tuple[str, str, Analysis]]) -> int: ...

    def write_access(self, conn: sa.Connection, records: Sequence[tuple[str, str, RecordAccess]]) -> int: ...


@runtime_checkable
class QueueStore(Protocol):
    """The queue of records to re-index: filling it (backfill: the records neither queued nor
    indexed yet), picking, deleting and failing its rows, and its figures."""

    def connect(self) -> AbstractContextManager[sa.Connection]: ...

    def begin(self) -> AbstractContextManager[sa.Connection]: ...

    def begin_exclusive(self) -> AbstractContextManager[sa.Connection]: ...

    def enqueue_many(self, conn: sa.Connection, items: Sequence[tuple[str, str, str]]) -> int: ...

    def queued_ids(self, conn: sa.Connection, source_type: str) -> set[str]: ...

    def chunk_ids(self, conn: sa.Connection, source_type: str) -> set[str]: ...

    def pick(self, conn: sa.Connection, limit: int, max_attempts: int) -> list[QueueRow]: ...

    def delete_queue_rows(self, conn: sa.Connection, dirty_ids: Sequence[int]) -> int: ...

    def queue_rows_present(self, conn: sa.Connection, dirty_ids: Sequence[int]) -> set[int]: ...

    def fail_queue_rows(self, conn: sa.Connection, dirty_ids: Sequence[int], error: str) -> int: ...

    def queue_stats(self, conn: sa.Connection, max_attempts: int) -> QueueStats: ...


@runtime_checkable
class WorkerStore(QueueStore, ChunkStore, Protocol):
    """The worker's use of a database besides its indexer's: the queue, a failed record's access,
    prepared batches (embedded outside the write lock) and the fill of a live generation's vectors."""

    prepared_writes: bool

    def worker_slot(self) -> AbstractContextManager[None]: ...

    def embed_texts(self, texts: Sequence[str]) -> dict[int, dict[str, bytes]]: ...

    def live_generations(self, conn: sa.Connection) -> dict[int, Generation]: ...

    def fill_pick(self, conn: sa.Connection, gen: Generation, limit: int) -> list[tuple[int, str]]: ...

    def fill_write(
        self,
        conn: sa.Connection,
        gen: Generation,
        chunks: Sequence[tuple[int, str]],
        vectors: Mapping[str, bytes] | None = None,
    ) -> int: ...

    def embed_passages(self, gen: Generation, contents: Sequence[str]) -> dict[str, bytes]: ...
