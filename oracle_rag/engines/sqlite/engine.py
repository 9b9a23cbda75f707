"""The embedded engine: one SQLite file, the ONNX model in-process.

Why these choices:
- ``sqlean.py`` instead of the stdlib ``sqlite3``: many Python builds cannot
  load extensions, and sqlite-vec is an extension. Only one SQLite binding is
  ever loaded in a process.
- ``vector_embedding(text)`` is registered on every connection so indexing
  and search SQL embed in the database, exactly like Oracle's
  ``VECTOR_EMBEDDING``.
- WAL mode so readers (searches) never wait for the worker. SQLite has one
  write lock per database, so the worker prepares each batch (pick, load,
  embed in-process) without it and takes ``BEGIN IMMEDIATE`` only to write
  the precomputed vectors (``prepared_writes``): other writers wait for a
  short write, never for the model. A file lock next to the database (the
  worker slot) keeps two workers, in any processes, off the same rows.
- Semantic search through an in-process exact vector index
  (``vector_cache.py``), kept in step with every process's writes by the
  RAG_CHUNK_LOG triggers (migration V5); SQL re-checks scope on every row.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import replace
from pathlib import Path
from typing import IO, Any

import numpy as np
import sqlalchemy as sa
import sqlean
import sqlite_vec

from oracle_rag.config import Settings
from oracle_rag.data_dir import prepare_data_dir
from oracle_rag.embedding import EmbeddingRuntime, catalog, ensure_model
from oracle_rag.embedding.sqlite_function import embedding_errors, register
from oracle_rag.engines import engine_sql as q
from oracle_rag.engines.base import Engine
from oracle_rag.engines.generations import INITIAL, Generation
from oracle_rag.engines.records import (
    ChunkWrite,
    Filters,
    Hit,
    KeywordHits,
    QueueRow,
    ReadOnlyFile,
    Run,
    Scope,
    SemanticHits,
    Where,
    embed_text,
    hits,
    key_hits,
    one_per_record,
    queue_rows,
    search_binds,
)
from oracle_rag.engines.roles import CandidateIndex
from oracle_rag.engines.sqlite.term_index import TermHits, TermIndex
from oracle_rag.engines.sqlite.vector_cache import DISTANCE_TOLERANCE, VectorCache
from oracle_rag.errors import DatabaseError, RagError, wrap_driver_error
from oracle_rag.sql_scripts import split_sqlite_script
from oracle_rag.text.bm25 import Stats, query_terms

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no flock
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger("oracle_rag.engines.sqlite.engine")


@contextmanager
def index_reads(what: str) -> Iterator[None]:
    """A driver error while an in-process index (vector cache, term index) reads the database,
    raised as the product's typed error naming ``what``."""
    try:
        yield
    except sqlean.Error as exc:
        raise wrap_driver_error(exc, what) from None


class SqliteEngine(Engine, CandidateIndex):
    """The embedded engine: one SQLite file, the model run in this process, and in-process
    indexes (the vector cache, the term index) that also propose hybrid's legs (CandidateIndex)."""

    name = "sqlite"
    transactional_ddl = True
    sql_dialect_name = "SQLite"
    # RAG_CHUNK_LOG rows kept (migration V5): a cache lagging further reloads.
    chunk_log_keep = 50_000
    # Needs the worker slot's file lock (fcntl); without it a batch stays one
    # write transaction, the text embedded inside the upsert.
    prepared_writes = fcntl is not None

    def __init__(self, settings: Settings, path: Path | None = None) -> None:
        super().__init__(settings)
        self.path = Path(path) if path is not None else settings.sqlite_path
        self._runtime: Any = None
        self._runtimes: dict[str, Any] = {}  # the other generations' models, by catalog name
        self._runtime_files: dict[str, tuple[int, int, int]] = {}  # the file each of those was opened from
        self._runtime_lock = threading.Lock()
        self._vector_cache: VectorCache | None = None
        self._term_index: TermIndex | None = None
        self._cache_lock = threading.Lock()
        self._stats_lock = threading.Lock()
        self._keyword_stats: dict[Any, tuple[tuple[int, int, Any], Stats]] = {}
        self._chunk_log_exists = False
        self.cache_fallbacks = 0  # searches the cache could not answer alone (tests, status)

    # -- the in-process model ---------------------------------------------
    def runtime(self) -> Any:
        """The ONNX runtime, created (and the model built) on first use."""
        with self._runtime_lock:
            if self._runtime is None:
                model = ensure_model(self.settings.data_path)
                threads = self.settings.embedding_threads or None
                self._runtime = EmbeddingRuntime(model, threads=threads)
            return self._runtime

    def runtime_for(self, model_name: str) -> Any:
        """The runtime of a generation's model (the catalog's file, built on first use).

        Reopened when the file was replaced since (``model switch`` rebuilds a
        file of an earlier build format for a new generation, possibly in
        another process): the new generation's vectors come from the new file.
        """
        if model_name == catalog.DEFAULT.name:
            return self.runtime()
        spec = catalog.get(model_name)
        with self._runtime_lock:
            runtime = self._runtimes.get(model_name)
            opened = self._runtime_files.get(model_name)
            if (
                runtime is not None
                and opened is not None
                and opened != _file_identity(spec.path_in(self.settings.data_path))
            ):
                runtime = None
            if runtime is None:
                path = ensure_model(self.settings.data_path, model=spec)
                runtime = EmbeddingRuntime(path, threads=self.settings.embedding_threads or None)
                self._runtimes[model_name] = runtime
                self._runtime_files[model_name] = _file_identity(path)
            return runtime

    def set_runtime_for(self, model_name: str, runtime: Any) -> None:
        """Use a given runtime for a generation's model (tests count its embeddings)."""
        if model_name == catalog.DEFAULT.name:
            self.set_runtime(runtime)
            return
        with self._runtime_lock:
            self._runtimes[model_name] = runtime
            self._runtime_files.pop(model_name, None)

    def generation_runtime(self, gen: Generation) -> Any:
        return self.runtime_for(gen.model_name)

    def load_generation_model(self, gen: Generation) -> str | None:
        """Build (first use) and open ``gen``'s model file; its sha256."""
        runtime = self.generation_runtime(gen)
        runtime.embed("oracle-rag generation check")
        return catalog.fingerprint(runtime.model_path)

    def build_vector_index(self, gen: Generation) -> str:
        """Read ``gen``'s vectors as the in-process index would, before a flip to it.

        Nothing persistent: each process builds its own index on its first
        search of the generation. This checks that it can (every vector of
        the generation present and well-formed) and says how many there are.
        """
        cache = VectorCache(self.path, gen)
        try:
            with index_reads("vector index check"):
                cache.sync()
            if cache.unusable:
                raise DatabaseError(f"the vectors of {gen.label()} cannot be indexed: {cache.unusable}")
            return f"{len(cache)} vectors checked for the in-process index"
        finally:
            cache.reset()

    def set_runtime(self, runtime: Any) -> None:
        """Use a given runtime (tests instrument it to count embedding calls)."""
        with self._runtime_lock:
            self._runtime = runtime

    def observe_embedding(self, observe: Callable[[float], None]) -> bool:
        """Time the in-process runtime's ``embed`` calls (it is wrapped once, in place)."""
        try:
            runtime = self.runtime()
        except Exception as exc:  # a missing or broken model: /healthz reports it; try again later
            log.warning(
                "embedding latency not measured yet: %s",
                exc if isinstance(exc, RagError) else type(exc).__name__,
            )
            return False
        if not isinstance(runtime, TimedRuntime):
            runtime = TimedRuntime(runtime)
            self.set_runtime(runtime)
        runtime.add_observer(observe)
        return True

    def _create_sa_engine(self) -> sa.Engine:
        prepare_data_dir(self.path.parent)
        engine = sa.create_engine(
            f"sqlite:///{self.path}",
            module=sqlean,
            connect_args={"timeout": 60, "check_same_thread": False},
            pool_size=max(self.settings.pool_size, 2),
            max_overflow=10,
        )
        engine_ref = self

        @sa.event.listens_for(engine, "connect")
        def _on_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we issue BEGIN ourselves
            dbapi_conn.enable_load_extension(True)
            sqlite_vec.load(dbapi_conn)
            dbapi_conn.enable_load_extension(False)
            register(dbapi_conn, _LazyRuntime(engine_ref), engine_ref.runtime_for)
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute("PRAGMA foreign_keys=ON")
            cur.execute("PRAGMA busy_timeout=60000")
            cur.execute("PRAGMA mmap_size=1073741824")  # measured: ~15% faster exact scans at 100k chunks
            cur.close()

        @sa.event.listens_for(engine, "begin")
        def _on_begin(conn: sa.Connection) -> None:
            mode = conn.get_execution_options().get("sqlite_begin", "DEFERRED")
            conn.exec_driver_sql(f"BEGIN {mode}")

        return engine

    @contextmanager
    def begin_exclusive(self) -> Iterator[sa.Connection]:
        try:
            with self.sa_engine.connect() as conn:
                conn.execution_options(sqlite_begin="IMMEDIATE")
                with conn.begin():
                    yield conn
        except sa.exc.DBAPIError as exc:
            raise wrap_driver_error(exc, "sqlite queue transaction") from None

    @contextmanager
    def worker_slot(self) -> Iterator[None]:
        """An exclusive ``flock`` on ``<database>.worker.lock``, one holder at a time across processes.

        The kernel releases it when its holder dies (SIGKILL included), so a
        killed worker never leaves it taken. Each call opens its own file
        description, so two workers in one process exclude each other too.
        """
        if fcntl is None:
            yield
            return
        path = self.path.with_name(self.path.name + ".worker.lock")
        handle: IO[bytes]
        try:
            handle = open(path, "a+b")  # noqa: SIM115 - closed below, which releases the lock
        except OSError:
            try:  # a read-only directory: the database's own write then fails and names the cause
                handle = open(path, "rb")  # noqa: SIM115
            except OSError:
                yield
                return
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
            yield
        finally:
            handle.close()

    def guarded_access(self) -> ReadOnlyFile:
        return ReadOnlyFile(self.path)

    def bind_value(self, value: Any) -> Any:
        if isinstance(value, dt.datetime):
            return value.strftime("%Y-%m-%dT%H:%M:%S")
        if isinstance(value, dt.date):
            return value.isoformat()
        return value

    # -- migrations -------------------------------------------------------
    def split_script(self, script: str) -> list[str]:
        return split_sqlite_script(script)

    # -- embedding --------------------------------------------------------
    def model_status(self, conn: sa.Connection) -> dict[str, Any]:
        gen = self.active_generation(conn)
        path = (
            self.settings.model_path
            if gen.model_name == catalog.DEFAULT.name
            else catalog.get(gen.model_name).path_in(self.settings.data_path)
        )
        status: dict[str, Any] = {
            "engine": self.name,
            "model": f"{gen.model_name} (ONNX, in-process)",
            "generation": gen.generation_id,
            "location": str(path),
            "present": path.is_file(),
        }
        if not status["present"]:
            status["fix"] = "run `oracle-rag model build` (it also builds on first use)"
            return status
        vec = self.embed(conn, "oracle-rag status check")
        status["dimensions"] = len(vec)
        status["test_norm"] = round(sum(v * v for v in vec) ** 0.5, 6)
        return status

    def embed(self, conn: sa.Connection, text: str) -> list[float]:
        with embedding_errors():  # a broken model is an EmbeddingError, not "SQLITE_ERROR"
            return super().embed(conn, text)

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
    ) -> list[Hit]:
        """Exact top-k by cosine distance, scope and filters applied before the top-k.

        With ``embedded_vector_cache`` (the default) the in-process matrix
        proposes the candidates and SQL re-checks them (``_cached_search``);
        otherwise, or when the cache cannot answer, the full SQL scan. Both
        are exact, so ``exact`` changes nothing here.
        """
        with embedding_errors():
            if not self.settings.embedded_vector_cache:
                return super().semantic_search(conn, query, k, scope, filters, exact, where)
            return self._cached_search(conn, query, k, scope, filters, where, text)

    # -- the in-process vector cache ----------------------------------------
    def vector_cache(self, gen: Generation | None = None) -> VectorCache:
        """This engine's cache of ``gen``'s vectors (empty until a semantic search loads it).

        One generation at a time: a search of another one (a flip) replaces
        it, and the next sync loads that generation's column.
        """
        with self._cache_lock:
            cache = self._vector_cache
            if cache is None or (gen is not None and cache.generation.generation_id != gen.generation_id):
                if cache is not None:
                    cache.reset()
                cache = self._vector_cache = VectorCache(self.path, gen or INITIAL)
            return cache

    def _cached_search(
        self,
        conn: sa.Connection,
        query: str,
        k: int,
        scope: Scope,
        filters: Filters,
        where: Where | None = None,
        text: bool = True,
    ) -> list[Hit]:
        # The query is embedded in the database, like every chunk, by the active generation's model.
        gen = self.active_generation(conn)
        qblob = conn.execute(self.statement(q.EMBED, gen=gen), {"text": gen.query_text(query)}).scalar_one()
        return self._search_by_vector(conn, gen, bytes(qblob), k, scope, filters, where, text)

    def semantic_search_by_vector(
        self,
        conn: sa.Connection,
        qblob: bytes,
        k: int,
        scope: Scope,
        filters: Filters,
        where: Where | None = None,
        text: bool = True,
    ) -> list[Hit]:
        """The cached search for an already embedded query (a float32 blob) of the active generation."""
        return self._search_by_vector(
            conn, self.active_generation(conn), qblob, k, scope, filters, where, text
        )

    def _search_by_vector(
        self,
        conn: sa.Connection,
        gen: Generation,
        qblob: bytes,
        k: int,
        scope: Scope,
        filters: Filters,
        where: Where | None = None,
        text: bool = True,
    ) -> list[Hit]:
        """The cached search for an already embedded query (a float32 blob); benches time this.

        The ``k`` nearest records (each its nearest chunk): the cache proposes
        the nearest ``k + max(8, k / 4)`` chunks, SQL re-checks them, and the list is
        cut to one chunk per record; when that leaves fewer than ``k`` records
        the cache is asked for four times as many. A ``where`` fragment cannot
        be evaluated in numpy: the exact SQL statement answers then.
        """
        if where is None:
            answer = self._cache_answer(conn, gen, qblob, k, scope, filters, text)
            if answer is not None:
                return answer
        binds = search_binds(scope, filters, where, qvec=qblob, k=k)
        return hits(conn.execute(self.statement(q.SEMANTIC_RECORDS_BY_VECTOR, where, gen), binds).fetchall())

    def _cache_answer(
        self,
        conn: sa.Connection,
        gen: Generation,
        qblob: bytes,
        k: int,
        scope: Scope,
        filters: Filters,
        text: bool = True,
    ) -> list[Hit] | None:
        cache = self.vector_cache(gen)
        with index_reads("vector cache sync"):
            cache.sync()
        query = np.frombuffer(qblob, dtype="<f4")
        fetch = k + max(8, k // 4)  # most records are one chunk; the loop below asks for more when not
        while True:
            found = cache.candidates(query, fetch, scope, filters)
            if found is None:
                return None
            if not found.ids:
                return []
            binds = search_binds(scope, filters, qvec=qblob, ids=found.ids)
            rows = conn.execute(
                self.statement(q.SEMANTIC_CANDIDATES if text else q.SEMANTIC_CANDIDATE_KEYS, gen=gen), binds
            ).fetchall()
            if not (
                len(rows) == len(found.ids)
                and all(abs(float(r[4]) - found.distances[int(r[0])]) <= DISTANCE_TOLERANCE for r in rows)
            ):
                # SQL dropped a candidate (scope, filters or a concurrent delete)
                # or disagrees on a distance: repair those entries, scan this time.
                self.cache_fallbacks += 1
                with index_reads("vector cache refresh"):
                    cache.refresh(found.ids)
                return None
            best = one_per_record(hits(rows))
            if len(best) >= k or len(found.ids) < fetch:  # enough records, or every visible chunk seen
                return best[:k]
            fetch *= 4

    # -- hybrid's legs without a per-leg SQL re-check (roles.CandidateIndex) -------------
    # Cache distances closer than this are ordered by SQL's (CANDIDATE_DISTANCES):
    # numpy's float32 dot and sqlite-vec's differ by ~2e-7 at most (measured), so
    # two candidates further apart rank the same either way.
    near_tie = 2e-6

    def propose_semantic(
        self, conn: sa.Connection, query: str, k: int, scope: Scope, filters: Filters
    ) -> SemanticHits | None:
        gen = self.active_generation(conn)
        if not self._cache_ready(gen):
            return None
        with embedding_errors():
            qblob = conn.execute(
                self.statement(q.EMBED, gen=gen), {"text": gen.query_text(query)}
            ).scalar_one()
        return self._propose_by_vector(conn, gen, bytes(qblob), k, scope, filters)

    def _cache_ready(self, gen: Generation) -> bool:
        if not self.settings.embedded_vector_cache:
            return False
        cache = self.vector_cache(gen)
        with index_reads("vector cache sync"):
            cache.sync()
        return cache.loaded and not cache.unusable

    def propose_semantic_by_vector(
        self, conn: sa.Connection, qblob: bytes, k: int, scope: Scope, filters: Filters
    ) -> SemanticHits | None:
        """:meth:`_propose_by_vector` for the active generation (benches time this)."""
        return self._propose_by_vector(conn, self.active_generation(conn), qblob, k, scope, filters)

    def _propose_by_vector(
        self, conn: sa.Connection, gen: Generation, qblob: bytes, k: int, scope: Scope, filters: Filters
    ) -> SemanticHits | None:
        """The ``k`` nearest records from the cache alone, ranked as the SQL re-check would rank them.

        The cache's candidates (keys included) are ordered by distance, then
        chunk id, as SEMANTIC_CANDIDATE_KEYS orders them. Runs of candidates
        whose cache distances lie within ``near_tie`` of each other need the
        distances SQL computes for them (CANDIDATE_DISTANCES) to be ordered
        as SQL orders them. A run that decides which records make the k, or
        which chunk stands for a record, is ordered here; a run inside the k
        is left open in :class:`SemanticHits` (hybrid settles it only if it
        can change the fused top k: most cannot, and 3 queries in 4 had a
        near tie somewhere in their 125 candidates). No scope check here:
        the caller shows these records only through ``shown_chunks``.
        """
        if not self._cache_ready(gen):
            return None
        cache = self.vector_cache(gen)
        query = np.frombuffer(qblob, dtype="<f4")
        fetch = k + max(8, k // 4)
        while True:
            found = cache.candidates(query, fetch, scope, filters, keys=True)
            if found is None or found.ranked is None:
                return None
            ranked = found.ranked
            first = _first_of_record(ranked)  # which records are there does not depend on the order
            if sum(first) < k and len(found.ids) >= fetch:
                fetch *= 4
                continue
            now, later = self._near_tie_runs(ranked, first, k)
            if now:
                settled = self._settle_chunks(conn, gen, qblob, ranked, now)
                if settled is None:
                    return None
                ranked = settled
                first = _first_of_record(ranked)
            records = [row for row, is_first in zip(ranked, first, strict=True) if is_first]
            return self._open_leg(conn, gen, qblob, key_hits(records[:k]), later)

    def _near_tie_runs(
        self, ranked: list[tuple[Any, ...]], first: list[bool], k: int
    ) -> tuple[list[Run], list[Run]]:
        """The runs of near ties in ``ranked`` (chunk positions [start, end)) to order now, and the
        runs left open (record positions [start, end) in the record list cut to ``k``).

        Open: a run whose records all lie within the first ``k`` and hold
        one chunk each there (the run decides neither which records make the
        k nor which chunk stands for a record). A run wholly past the k is
        cut away: neither.
        """
        near = self.near_tie
        chunk_runs: list[Run] = []
        start = 0
        for i in range(1, len(ranked) + 1):
            if i == len(ranked) or ranked[i][3] - ranked[i - 1][3] >= near:
                if i - start > 1:
                    chunk_runs.append((start, i))
                start = i
        if not chunk_runs:
            return [], []
        position = list(itertools.accumulate(first))  # records up to each chunk (inclusive)
        now: list[Run] = []
        later: list[Run] = []
        for a, b in chunk_runs:
            keys = {(row[1], row[2]) for row in ranked[a:b]}
            lo = position[a - 1] if a else 0  # records before the run
            hi = position[b - 1]  # records up to its end
            if len(keys) < b - a:
                now.append((a, b))  # two chunks of one record: which one stands for it
            elif hi <= lo or lo >= k:
                continue  # every record seen before it, or past the k: its order changes nothing
            elif hi > k:
                now.append((a, b))  # straddles the cut: which records make the k
            else:
                later.append((lo, hi))
        return now, later

    def _settle_chunks(
        self,
        conn: sa.Connection,
        gen: Generation,
        qblob: bytes,
        ranked: list[tuple[Any, ...]],
        runs: Sequence[Run],
    ) -> list[tuple[Any, ...]] | None:
        """``ranked`` with each run (positions [start, end)) in SQL's order: SQL's distances, then id.

        Candidates in different runs are further apart than twice the
        difference between the two computations, so a run keeps its
        positions. None: SQL lost a candidate or disagrees on one (a
        concurrent write, a stale entry): the caller uses the checked leg.
        """
        ids = [row[0] for a, b in runs for row in ranked[a:b]]
        rows = conn.execute(
            self.statement(q.CANDIDATE_DISTANCES, gen=gen), {"qvec": qblob, "ids": json.dumps(sorted(ids))}
        ).fetchall()
        if len(rows) != len(ids):
            return None
        exact = {int(chunk_id): float(score) for chunk_id, score in rows}
        out = list(ranked)
        for a, b in runs:
            run = []
            for row in ranked[a:b]:
                value = exact.get(row[0])
                if value is None or abs(value - row[3]) > DISTANCE_TOLERANCE:
                    return None
                run.append((row[0], row[1], row[2], value, *row[4:]))
            out[a:b] = sorted(run, key=lambda row: (row[3], row[0]))
        return out

    def _open_leg(
        self, conn: sa.Connection, gen: Generation, qblob: bytes, hits: list[Hit], runs: list[Run]
    ) -> SemanticHits:
        """``hits`` with the runs ``runs`` open, settled on demand in SQL (SemanticHits.settle)."""

        def settle(chosen: Sequence[Run]) -> SemanticHits | None:
            rows = [(h.chunk_id, h.source_type, h.source_id, h.score) for h in hits]
            settled = self._settle_chunks(conn, gen, qblob, rows, chosen)
            if settled is None:
                return None
            by_id = {h.chunk_id: h for h in hits}
            out = [
                by_id[row[0]] if by_id[row[0]].score == row[3] else replace(by_id[row[0]], score=row[3])
                for row in settled
            ]
            done = set(chosen)
            return self._open_leg(conn, gen, qblob, out, [r for r in runs if r not in done])

        return SemanticHits(hits, runs, settle)

    def propose_keyword(
        self, conn: sa.Connection, query: str, k: int, scope: Scope, filters: Filters
    ) -> KeywordHits | None:
        """The ``k`` best records by BM25 from the in-process index alone (their chunk 0, no text).

        The index ranks exactly as the SQL statement does (term_index.py);
        the lengths it used travel with the hits, for ``record_passages`` to
        re-check with the scope when the records are shown.
        """
        terms = query_terms(query)
        if not terms:
            return KeywordHits([], terms, {}, {})
        if not self.settings.embedded_term_index:
            return None
        found = self._term_index_search(terms, k, scope, filters)
        if found is None:
            return None
        return KeywordHits(key_hits(found.rows), terms, found.weights, found.lengths)

    def reject_proposals(self, legs: Mapping[str, Sequence[Hit]]) -> None:
        self.cache_fallbacks += 1
        with index_reads("in-process index refresh"):
            if legs.get("semantic"):
                self.vector_cache().refresh([h.chunk_id for h in legs["semantic"]])
            if legs.get("keyword"):
                self.term_index().refresh([h.chunk_id for h in legs["keyword"]])

    # -- the in-process BM25 index ---------------------------------------------
    def term_index(self) -> TermIndex:
        """This engine's BM25 index (empty until the first keyword search loads it)."""
        with self._cache_lock:
            if self._term_index is None:
                self._term_index = TermIndex(self.path)
            return self._term_index

    def _term_index_search(
        self, terms: Mapping[str, int], k: int, scope: Scope, filters: Filters
    ) -> TermHits | None:
        """The in-process index brought up to date, then its ``k`` best records at the configured
        BM25 parameters; ``None``: the index cannot answer (the SQL path does)."""
        index = self.term_index()
        with index_reads("term index sync"):
            index.sync()
        params = self.bm25_params()
        return index.search(terms, k, scope, filters, params.k1, params.b)

    def keyword_search(
        self,
        conn: sa.Connection,
        query: str,
        k: int,
        scope: Scope,
        filters: Filters,
        where: Where | None = None,
        text: bool = True,
    ) -> list[Hit]:
        """BM25 from the in-process index (``embedded_term_index``), re-checked in SQL; else the SQL path.

        A ``where`` fragment cannot be evaluated in numpy: the SQL path answers then.
        """
        terms = query_terms(query)
        if where is not None or not terms or not self.settings.embedded_term_index:
            return super().keyword_search(conn, query, k, scope, filters, where, text)
        found = self._term_index_search(terms, k, scope, filters)
        if found is not None:
            result, complete = self.record_passages(
                conn, found.best, terms, found.weights, scope, filters, None, found.lengths, text
            )
            if complete:
                return result
            self.cache_fallbacks += 1
            with index_reads("term index refresh"):
                self.term_index().refresh([rid for rid, _ in found.best])
        return super().keyword_search(conn, query, k, scope, filters, where, text)

    # The keyword statement's N and total length per scope, valid while the
    # change log has not moved (every write of RAG_CHUNK logs a row, and a
    # record's analysis only changes with its chunk 0): the statement then
    # reads only the query terms' postings, not every visible record.
    # False runs the statement as Oracle does (statistics scanned in it).
    keyword_stats_cached = True
    keyword_stats_entries = 1024

    def keyword_stats(
        self, conn: sa.Connection, scope: Scope, filters: Filters, where: Where | None
    ) -> Stats | None:
        if not self.keyword_stats_cached:
            return None
        if not self._chunk_log_exists:
            self._chunk_log_exists = bool(conn.execute(self.statement(q.CHUNK_LOG_EXISTS)).scalar())
            if not self._chunk_log_exists:
                return None
        # The groups are part of the visible set (a caller in a group sees more than without it).
        key: Any = (
            scope.see_all,
            None if scope.see_all else (scope.caller_id, tuple(sorted(set(scope.groups)))),
            filters.facets,
            tuple(filters.source_types),
            None if where is None else (where.sql, tuple(sorted(where.binds.items()))),
        )
        try:
            hash(key)
        except TypeError:  # a where bind that is a list: not cached
            return None
        newest = conn.execute(self.statement(q.CHUNK_LOG_STATE)).one()[1]
        try:
            st = os.stat(self.path)
            position = (st.st_dev, st.st_ino, newest)
        except OSError:
            return None
        with self._stats_lock:
            hit = self._keyword_stats.get(key)
            if hit is not None and hit[0] == position:
                return hit[1]
        n, total = conn.execute(
            self.statement(q.KEYWORD_STATS, where), search_binds(scope, filters, where)
        ).one()
        stats = Stats(int(n), int(total))
        with self._stats_lock:
            if len(self._keyword_stats) >= self.keyword_stats_entries:
                self._keyword_stats.pop(next(iter(self._keyword_stats)))
            self._keyword_stats[key] = (position, stats)
        return stats

    def embed_texts(self, texts: Sequence[str]) -> dict[int, dict[str, bytes]]:
        """The vectors ``vector_embedding()`` would store for each live generation, the same way.

        ``texts`` are chunk contents; each generation embeds them as its
        passages (prefix, then the 4000-byte cut). Per model the distinct
        texts are primed (one batched encoder run) and each is then taken
        through ``runtime.embed``, exactly the function's path, so a wrapper
        that counts, times or refuses texts sees every one.
        """
        if not texts:
            return {}
        with self.connect() as conn:
            live = self.live_generations(conn)
        return {gen.generation_id: self.embed_passages(gen, texts) for gen in live.values()}

    def embed_passages(self, gen: Generation, contents: Sequence[str]) -> dict[str, bytes]:
        """``gen``'s vectors of chunk contents, keyed by the passage text it embeds."""
        distinct = list(dict.fromkeys(embed_text(gen.passage_text(c)) for c in contents))
        if not distinct:
            return {}
        runtime = self.generation_runtime(gen)
        primed = getattr(runtime, "primed", None)
        with primed(distinct) if primed else nullcontext():
            return {text: runtime.to_blob(runtime.embed(text)) for text in distinct}

    def embed_many(self, texts: Sequence[str], kind: str) -> np.ndarray:
        """One batched encoder run over the distinct texts (prefixed for ``kind``), then each through
        ``runtime.embed``."""
        if not texts:
            return np.zeros((0, 0), dtype=np.float32)
        with self.connect() as conn:  # the active generation's model, as every search uses
            gen = self.active_generation(conn)
        runtime = self.generation_runtime(gen)
        prefixed = [gen.text_as(kind, t) for t in texts]
        distinct = list(dict.fromkeys(prefixed))
        primed = getattr(runtime, "primed", None)
        with primed(distinct) if primed else nullcontext():
            vectors = {t: runtime.embed(t) for t in distinct}
        return np.stack([np.asarray(vectors[t], dtype=np.float32) for t in prefixed])

    def upsert_chunks(
        self,
        conn: sa.Connection,
        chunks: Sequence[ChunkWrite],
        vectors: Mapping[int, Mapping[str, bytes]] | None = None,
    ) -> int:
        if vectors is not None:
            count = super().upsert_chunks(conn, chunks, vectors)
            self._prune_chunk_log(conn)
            return count
        # SQLite replaces an exception raised in vector_embedding() with a
        # fixed "user-defined function raised exception": re-raise the
        # EmbeddingError itself so the worker records why (broken model...).
        # Embed the batch's texts in one batched run per live generation first;
        # vector_embedding() in the statement then takes each vector from the memo.
        with contextlib.ExitStack() as stack:
            stack.enter_context(embedding_errors())
            for gen in self.live_generations(conn).values() if chunks else ():
                primed = getattr(self.generation_runtime(gen), "primed", None)
                if primed:
                    stack.enter_context(primed([embed_text(gen.passage_text(c.content)) for c in chunks]))
            count = super().upsert_chunks(conn, chunks)
        self._prune_chunk_log(conn)
        return count

    def delete_chunks(self, conn: sa.Connection, source_type: str, ids: Sequence[str]) -> int:
        count = super().delete_chunks(conn, source_type, ids)
        self._prune_chunk_log(conn)
        return count

    def _prune_chunk_log(self, conn: sa.Connection) -> None:
        """Keep the newest ``chunk_log_keep`` rows of RAG_CHUNK_LOG, in the writer's transaction.

        A prefix delete on the primary key, normally a handful of rows. A
        process whose cache lags further than that reloads in full (it sees
        the gap); a database not yet migrated to V5 has no log to prune.
        """
        if not self._chunk_log_exists:
            self._chunk_log_exists = bool(conn.execute(self.statement(q.CHUNK_LOG_EXISTS)).scalar())
            if not self._chunk_log_exists:
                return
        conn.execute(self.statement(q.PRUNE_CHUNK_LOG), {"keep": self.chunk_log_keep})

    def dispose(self) -> None:
        super().dispose()
        with self._cache_lock:
            if self._vector_cache is not None:
                self._vector_cache.reset()
            if self._term_index is not None:
                self._term_index.reset()

    # -- queue and search -------------------------------------------------
    def pick(self, conn: sa.Connection, limit: int, max_attempts: int) -> list[QueueRow]:
        rows = conn.execute(self.statement(q.PICK), {"limit": limit, "max_attempts": max_attempts}).fetchall()
        return queue_rows(rows)


def _first_of_record(ranked: Sequence[tuple[Any, ...]]) -> list[bool]:
    """Per row (CHUNK_ID, SOURCE_TYPE, SOURCE_ID, ...): whether it is its record's
    first (records.one_per_record)."""
    seen: set[tuple[Any, Any]] = set()
    out = []
    for row in ranked:
        key = (row[1], row[2])
        out.append(key not in seen)
        seen.add(key)
    return out


class TimedRuntime:
    """Wraps the in-process embedding runtime to time each ``embed`` call.

    Everything else is delegated, so the engine (and tests reading
    ``runtime().calls``) see the same object behaviour.
    """

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.observers: list[Callable[[float], None]] = []
        self._lock = threading.Lock()

    def embed(self, text: str) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.embed(text)
        finally:
            elapsed = time.perf_counter() - started
            for observe in list(self.observers):
                observe(elapsed)

    def add_observer(self, observe: Callable[[float], None]) -> None:
        with self._lock:
            self.observers.append(observe)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class _LazyRuntime:
    """Defers model loading until SQL first calls ``vector_embedding``."""

    def __init__(self, engine: SqliteEngine) -> None:
        self._engine = engine

    def __getattr__(self, name: str) -> Any:
        return getattr(self._engine.runtime(), name)


def _file_identity(path: Path) -> tuple[int, int, int]:
    """Which file ``path`` names now: an atomic replace gives another inode (and mtime)."""
    try:
        st = path.stat()
    except OSError:
        return (0, 0, 0)
    return (st.st_ino, st.st_mtime_ns, st.st_size)
