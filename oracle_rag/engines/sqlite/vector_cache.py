"""An in-process exact vector index for the embedded engine, kept in step across processes.

Why: SQLite has no vector index, and ``vec_distance_cosine`` over every row
costs ~12x a numpy brute force at 100k chunks (docs/retrieval.md). This
module keeps every RAG_CHUNK embedding in one float32 matrix (unit rows, so
cosine distance = 1 - dot) with the scope and filter columns beside it as
numpy arrays. A search applies the scope and filters as boolean masks
*before* the top-k, so a developer still gets k rows whenever k are visible.

The cache only proposes candidates. The engine then re-runs the scope and
filter predicates in SQL on exactly those ids and recomputes the distance
there (``SEMANTIC_CANDIDATES``); if SQL drops a candidate or disagrees on a
distance, the cache was wrong about something (a concurrent write, a bug):
the rows concerned are re-read and the query falls back to the full SQL
scan. The access scope is therefore decided by SQL on every result row.

Staying in step: triggers (migration V5) append the CHUNK_ID of every
insert, update and delete of RAG_CHUNK to RAG_CHUNK_LOG in the writer's own
transaction. Before each search, :meth:`VectorCache.sync` reads the log
rows after its position (a primary-key range, normally empty) and re-reads
those chunks; a missing row is a delete. It does so on the cache's own
connection (not the pool's: no deadlock when the pool is exhausted), in a
fresh read transaction started under the lock, so successive syncs see ever
newer snapshots and the position always matches the rows read with it. The
log is pruned from the front by the engine's write path; a cache whose
position is older than the oldest row left, newer than the log's high-water
mark, or whose database file was replaced, reloads everything.

Memory: 4 bytes x dimension per chunk (100k x 384 = 154 MB) plus ~40 bytes
of scope columns per chunk and up to 25 % growth headroom (174 MB measured
at 100k); loaded lazily by the first semantic search. Thread-safe: one lock
guards the arrays and the connection; the search's SQL runs outside it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np

from oracle_rag.engines import engine_sql as q
from oracle_rag.engines.access_mask import AccessSlots
from oracle_rag.engines.generations import INITIAL, Generation, needs_generation, render
from oracle_rag.engines.indexed_columns import INDEXED_COLUMNS
from oracle_rag.engines.records import Filters, Scope
from oracle_rag.engines.statements import Sql

log = logging.getLogger("oracle_rag.vector_cache")

NULL = np.iinfo(np.int64).min  # stands for SQL NULL in the id columns
# Candidates within this much (in dot product) of the k-th best are kept, so
# float differences between numpy and sqlite-vec cannot change the top-k:
# both are float32 dot products of unit vectors, off by ~1e-6 at most.
TIE_MARGIN = 2e-4
# A SQL distance further than this from the cache's means a stale vector.
DISTANCE_TOLERANCE = 1e-4
# More candidates than this (thousands of near-identical vectors): scan in SQL.
MAX_CANDIDATES = 2000
ID_BATCH = 500


@dataclass(frozen=True)
class Candidates:
    """What the cache proposes: chunk ids and the distance it computed for each."""

    ids: list[int]
    distances: dict[int, float]
    # With ``keys``: the candidates in the order (distance, chunk id), each (CHUNK_ID, SOURCE_TYPE,
    # SOURCE_ID, distance, OWNER_ID, (the indexed facet columns), CHUNK_NO), None for NULL.
    ranked: list[tuple[Any, ...]] | None = None


class Unusable(Exception):
    """The stored data cannot be mirrored exactly (a non-integer id column, a
    vector of another size); the engine then uses the SQL scan."""


def int_or_null(value: Any) -> int:
    if value is None:
        return int(NULL)
    if isinstance(value, int) and not isinstance(value, bool) and NULL < value <= np.iinfo(np.int64).max:
        return value
    raise Unusable(f"non-integer value of type {type(value).__name__} in a scope column")


# Where a cache's rows (CHUNK_ID, SOURCE_TYPE, OWNER_ID, then the indexed facet columns) hold them.
ROW_INDEXED = slice(3, 3 + len(INDEXED_COLUMNS))


def filterable(scope: Scope, filters: Filters) -> bool:
    """Whether the caller's id and the filters' values compare exactly with the int64 columns."""
    return all(
        v is None or (isinstance(v, int) and NULL < v <= np.iinfo(np.int64).max)
        for v in (scope.caller_id, *filters.indexed)
    )


def indexed_mask(mask: np.ndarray, columns: Sequence[np.ndarray], n: int, filters: Filters) -> np.ndarray:
    """``mask`` narrowed to the slots whose indexed facet columns hold the filters' values."""
    for column, value in zip(columns, filters.indexed, strict=True):
        if value is not None:
            mask &= column[:n] == value
    return mask


def sqlite_text(sql: Sql, gen: Generation = INITIAL) -> str:
    """The SQLite text (the cache reads on a plain DBAPI connection of its own), ``gen``'s column."""
    if sql.sqlite is None:
        raise NotImplementedError("the vector cache runs SQLite statements only")
    return render(sql.sqlite, gen, "sqlite") if needs_generation(sql.sqlite) else sql.sqlite


class VectorCache:
    """The matrix, the scope columns and the position in RAG_CHUNK_LOG, for one model generation.

    Holds ``generation``'s vectors only (its column); a chunk whose vector of
    that generation is missing is left out, so the cache never proposes a
    chunk by another model's vector.
    """

    def __init__(self, path: os.PathLike[str] | str, generation: Generation = INITIAL) -> None:
        self.generation = generation
        self._path = path
        self._lock = threading.Lock()
        self._conn: Any = None  # the cache's own connection, used under the lock only
        self.full_loads = 0  # counters for tests and status
        self.delta_rows = 0
        self._clear()

    # -- state -------------------------------------------------------------
    def _clear(self) -> None:
        self.loaded = False
        self.position = 0  # highest RAG_CHUNK_LOG.SEQ applied
        self.unusable: str | None = None
        self._file_id: tuple[int, int] | None = None
        self._dim = 0
        self._n = 0  # slots in use (live or freed)
        self._free: list[int] = []
        self._slot: dict[int, int] = {}
        self._types: dict[str, int] = {}
        self._access = AccessSlots()
        self._failed: frozenset[str] = frozenset()
        self._alloc(0, 0)

    def _alloc(self, capacity: int, dim: int) -> None:
        self._vectors = np.zeros((capacity, dim), dtype=np.float32)
        self._ids = np.full(capacity, -1, dtype=np.int64)
        self._owner = np.full(capacity, NULL, dtype=np.int64)
        self._indexed = [np.full(capacity, NULL, dtype=np.int64) for _ in INDEXED_COLUMNS]
        self._type = np.full(capacity, -1, dtype=np.int32)
        self._live = np.zeros(capacity, dtype=bool)
        self._first = np.zeros(capacity, dtype=bool)  # CHUNK_NO = 0 (Filters.first_chunk)
        self._chunk_no = np.zeros(capacity, dtype=np.int64)
        self._source_id = np.full(capacity, None, dtype=object)  # what a hit needs besides the scope columns
        self._access.grow(capacity)

    def _grow(self, needed: int) -> None:
        capacity = len(self._ids)
        if needed <= capacity:
            return
        new = max(needed, capacity + capacity // 4 + 1024)
        old = self._arrays()
        self._alloc(new, self._dim)
        for dst, src in zip(self._arrays(), old, strict=True):
            dst[: len(src)] = src
        self._access.grow(new)

    def _arrays(self) -> tuple[np.ndarray, ...]:
        return (
            self._vectors,
            self._ids,
            self._owner,
            *self._indexed,
            self._type,
            self._live,
            self._first,
            self._chunk_no,
            self._source_id,
        )

    def __len__(self) -> int:
        return len(self._slot)

    @property
    def nbytes(self) -> int:
        return int(sum(a.nbytes for a in self._arrays())) + self._access.nbytes

    def reset(self) -> None:
        """Forget everything and close the connection (the engine was disposed)."""
        with self._lock:
            self._close()
            self._clear()

    # -- keeping in step -----------------------------------------------------
    def sync(self) -> None:
        """Bring the cache up to the newest committed state of the database.

        Reads on the cache's own connection, in a fresh read transaction
        started under the lock, so successive syncs see monotonically newer
        snapshots and the log position always matches the rows read with it.
        A position newer than the database's high-water mark, or another
        file at the path, means the database was replaced: full reload.
        """
        with self._lock:
            file_id = self._file_identity()
            if self._file_id is not None and file_id != self._file_id:
                log.info("vector cache: the database file was replaced; reloading")
                self._close()
                self.loaded = False
            with self._read_transaction() as conn:
                self._sync_locked(conn, file_id)

    def _sync_locked(self, conn: Any, file_id: tuple[int, int] | None) -> None:
        if not self.loaded and not conn.execute(sqlite_text(q.CHUNK_LOG_EXISTS)).fetchone()[0]:
            self._clear()
            self.unusable = "RAG_CHUNK_LOG is missing: run `oracle-rag migrate`"
            return  # checked again on the next search
        # Sources whose permission data failed (not in the change log: read on every sync, a tiny table).
        self._failed = frozenset(str(r[0]) for r in conn.execute(sqlite_text(q.ACCESS_FAILURES)))
        oldest, newest = conn.execute(sqlite_text(q.CHUNK_LOG_STATE)).fetchone()
        newest = int(newest or 0)
        if self.unusable and newest == self.position and self._file_id == file_id:
            return
        if not self.loaded or newest < self.position:
            self._full_load(conn, newest, file_id)
            return
        if newest == self.position:
            return
        if oldest is None or int(oldest) > self.position + 1:
            log.info("vector cache: change log pruned past position %d; reloading", self.position)
            self._full_load(conn, newest, file_id)
            return
        changed = [
            int(r[0])
            for r in conn.execute(sqlite_text(q.CHUNK_LOG_CHANGES), {"after": self.position, "upto": newest})
        ]
        if len(changed) > len(self._slot) // 2 + 1000:  # cheaper to read everything
            self._full_load(conn, newest, file_id)
            return
        try:
            self._apply(conn, changed)
        except Unusable as exc:
            self._mark_unusable(str(exc), newest, file_id)
            return
        self.delta_rows += len(changed)
        self.position = newest

    def refresh(self, chunk_ids: Iterable[int]) -> None:
        """Sync, then re-read some chunks (after SQL rejected the cache's candidates).

        Repairs an entry the log could not have announced (a row rewritten
        behind the triggers' back, a bug); the same fresh snapshot as the sync.
        """
        ids = sorted({int(i) for i in chunk_ids})
        with self._lock:
            file_id = self._file_identity()
            with self._read_transaction() as conn:
                self._sync_locked(conn, file_id)
                if self.loaded and not self.unusable:
                    try:
                        self._apply(conn, ids)
                    except Unusable as exc:
                        self._mark_unusable(str(exc), self.position, file_id)

    @contextmanager
    def _read_transaction(self) -> Iterator[Any]:
        """One snapshot on the cache's own connection (call with the lock held)."""
        conn = self._connection()
        conn.execute("BEGIN")
        try:
            yield conn
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    def _connection(self) -> Any:
        if self._conn is None:
            import sqlean

            conn = sqlean.connect(str(self._path), timeout=60, check_same_thread=False)
            conn.isolation_level = None  # explicit BEGIN/COMMIT
            conn.execute("PRAGMA busy_timeout=60000")
            self._conn = conn
        return self._conn

    def _close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _file_identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self._path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def _mark_unusable(self, why: str, position: int, file_id: tuple[int, int] | None) -> None:
        log.warning("vector cache disabled for this database state (%s); using the SQL scan", why)
        self._clear()
        self.unusable = why
        self.position = position
        self._file_id = file_id

    def _full_load(self, conn: Any, position: int, file_id: tuple[int, int] | None) -> None:
        """Everything read again (``_read_all``); what cannot be held marks this state unusable."""
        self._clear()
        try:
            self._read_all(conn, position)
        except Unusable as exc:
            self._mark_unusable(str(exc), position, file_id)
            return
        self.loaded = True
        self.position = position
        self._file_id = file_id
        self.full_loads += 1

    def _read_all(self, conn: Any, position: int) -> None:
        cursor = conn.execute(sqlite_text(q.VECTOR_ROWS, self.generation))
        while True:
            batch = cursor.fetchmany(5000)
            if not batch:
                break
            self._store(batch)
        log.info(
            "vector cache: loaded %d chunks (%.0f MB) at log position %d",
            len(self._slot),
            self.nbytes / 1e6,
            position,
        )

    def _apply(self, conn: Any, chunk_ids: Sequence[int]) -> None:
        for start in range(0, len(chunk_ids), ID_BATCH):
            part = [int(i) for i in chunk_ids[start : start + ID_BATCH]]
            rows = conn.execute(
                sqlite_text(q.VECTOR_ROWS_BY_ID, self.generation), {"ids": json.dumps(part)}
            ).fetchall()
            present = {int(r[0]) for r in rows}
            for chunk_id in part:
                if chunk_id not in present:
                    self._remove(chunk_id)
            self._store(rows)

    def _remove(self, chunk_id: int) -> None:
        slot = self._slot.pop(chunk_id, None)
        if slot is None:
            return
        self._live[slot] = False
        self._ids[slot] = -1
        self._access.clear(slot)
        self._free.append(slot)

    def _store(self, rows: Sequence[Any]) -> None:
        """Insert or overwrite rows (CHUNK_ID, SOURCE_TYPE, OWNER_ID, the two indexed facet columns,
        EMBEDDING, ACCESS_OWNER, ACCESS_PUBLIC, ACCESS_GROUPS, CHUNK_NO, SOURCE_ID, the vector's
        generation): engine_sql.VECTOR_ROWS.

        A row whose vector another generation wrote (or none) is left out.
        """
        wanted = self.generation.generation_id
        for r in rows:
            if r[11] is None or int(r[11]) != wanted:
                self._remove(int(r[0]))
        rows = [r for r in rows if r[11] is not None and int(r[11]) == wanted]
        if not rows:
            return
        if self._dim == 0:
            dim = len(rows[0][5]) // 4
            if dim == 0:
                raise Unusable("an empty embedding")
            self._dim = dim
            self._vectors = np.zeros((len(self._ids), dim), dtype=np.float32)
        blob_size = self._dim * 4
        blobs = []
        for r in rows:
            blob = r[5]
            if not isinstance(blob, bytes | bytearray | memoryview) or len(blob) != blob_size:
                raise Unusable("an embedding of another size or type")
            blobs.append(bytes(blob))
        matrix = np.frombuffer(b"".join(blobs), dtype="<f4").reshape(len(rows), self._dim).astype(np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        np.divide(matrix, norms, out=matrix, where=norms > 0)
        new_slots = sum(1 for r in rows if int(r[0]) not in self._slot)
        self._grow(self._n + max(0, new_slots - len(self._free)))
        for i, r in enumerate(rows):
            chunk_id = int(r[0])
            slot = self._slot.get(chunk_id)
            if slot is None:
                if self._free:
                    slot = self._free.pop()
                else:
                    slot = self._n
                    self._n += 1
                self._slot[chunk_id] = slot
            source_type = r[1]
            if not isinstance(source_type, str):
                raise Unusable("a non-text SOURCE_TYPE")
            code = self._types.setdefault(source_type, len(self._types))
            self._vectors[slot] = matrix[i]
            self._ids[slot] = chunk_id
            self._owner[slot] = int_or_null(r[2])
            for column, value in zip(self._indexed, r[ROW_INDEXED], strict=True):
                column[slot] = int_or_null(value)
            self._type[slot] = code
            self._access.set(slot, int_or_null(r[6]), r[7], r[8])
            self._first[slot] = r[9] == 0
            self._chunk_no[slot] = int(r[9])
            self._source_id[slot] = str(r[10])
            self._live[slot] = True

    # -- searching -----------------------------------------------------------
    def candidates(
        self, query: np.ndarray, k: int, scope: Scope, filters: Filters, keys: bool = False
    ) -> Candidates | None:
        """Ids that contain the exact top-k of the rows visible to ``scope`` and ``filters``.

        ``None`` means "use the SQL scan" (the cache is unusable, a bound value
        cannot be compared exactly in numpy, or too many near-ties). ``keys``
        adds what a hit needs besides its distance (hybrid's semantic leg is
        built from them without SQL: SqliteEngine.propose_semantic).
        """
        if not filterable(scope, filters):
            return None
        q = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        if not np.isfinite(norm) or norm == 0.0:
            return None
        q = q / norm
        with self._lock:
            if not self.loaded or self.unusable:
                return None
            if len(q) != self._dim and self._slot:
                return None
            n = self._n
            mask = self._live[:n] & self._access.visible(n, scope, self._type, self._types, self._failed)
            mask = indexed_mask(mask, self._indexed, n, filters)
            if filters.source_types:
                codes = [self._types[t] for t in filters.source_types if t in self._types]
                mask &= np.isin(self._type[:n], np.asarray(codes, dtype=np.int32))
            if filters.first_chunk:
                mask &= self._first[:n]
            visible = np.flatnonzero(mask)
            if len(visible) == 0:
                return Candidates([], {}, [] if keys else None)
            # numpy's own loop, not BLAS, on the gathered rows and on the full matrix alike:
            # OpenBLAS hands a block of a few thousand rows to its threads, whose wake-up cost
            # 6-10 ms a search on a shared 2-core machine against 0.3 ms here (3,257 rows;
            # bench/access_scope.py); and its sgemv costs about twice einsum's CPU time even on
            # one thread (10k x 384: 1.0-1.3 ms against 0.75; 100k: 14-15 ms against 7.5).
            if len(visible) * 2 < n:
                scores = np.einsum("ij,j->i", np.take(self._vectors, visible, axis=0), q)
            else:
                scores = np.einsum("ij,j->i", self._vectors[:n], q)[visible]
            if len(visible) > k:
                top = np.argpartition(-scores, k - 1)[:k]
                kth = float(scores[top].min())
                keep = np.flatnonzero(scores >= kth - TIE_MARGIN)
                if len(keep) > MAX_CANDIDATES:
                    return None
                visible, scores = visible[keep], scores[keep]
            ids = self._ids[visible]
            distance = 1.0 - scores.astype(np.float64)  # 1 - float(s) as Python computes it, in double
            ranked = None
            if keys:
                order = np.lexsort((ids, distance))
                ranked = record_rows(
                    visible[order],
                    self._ids,
                    self._types,
                    self._type,
                    self._source_id,
                    distance[order].tolist(),
                    self._owner,
                    self._indexed,
                    chunk_no=self._chunk_no,
                )
        id_list = ids.tolist()
        return Candidates(id_list, dict(zip(id_list, distance.tolist(), strict=True)), ranked)


def record_rows(
    slots: np.ndarray,
    ids: np.ndarray,
    type_codes: dict[str, int],
    types: np.ndarray,
    source_ids: np.ndarray,
    scores: list[float],
    owner: np.ndarray,
    indexed: Sequence[np.ndarray],
    chunk_no: np.ndarray | None = None,
) -> list[tuple[Any, ...]]:
    """Per slot, in order: (id, type name, source id, score, owner, the indexed facet columns' values
    as a tuple, CHUNK_NO: ``chunk_no``'s value, or 0 without it), NULL as None (records.key_hits).

    Column by column (``tolist`` per column, not one numpy scalar per value):
    hybrid builds ~200 of them per search.
    """
    names = [""] * len(type_codes)
    for name, code in type_codes.items():
        names[code] = name
    null = int(NULL)  # a Python int: list membership compares without numpy scalars

    def nullable(column: np.ndarray) -> list[Any]:
        values = column[slots].tolist()
        return [None if v == null else v for v in values] if null in values else values

    numbers = [0] * len(slots) if chunk_no is None else chunk_no[slots].tolist()
    return list(
        zip(
            ids[slots].tolist(),
            [names[t] for t in types[slots].tolist()],
            source_ids[slots].tolist(),
            scores,
            nullable(owner),
            zip(*(nullable(column) for column in indexed), strict=True),
            numbers,
            strict=True,
        )
    )
