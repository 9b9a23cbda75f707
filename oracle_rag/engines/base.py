"""The engine seam: everything whose SQL or behaviour differs between Oracle and SQLite.

The indexer, worker, retriever, chat and web layer are engine-free: they call
these methods with a SQLAlchemy ``Connection`` and never see SQL dialects or
an engine's name. Statements come from ``*_sql.py`` modules as
:class:`~oracle_rag.engines.statements.Sql` objects, and only the engine
chooses the text (:meth:`Engine.statement`); what differs beyond text is a
method or attribute here (capabilities), overridden by ``OracleEngine`` and
``SqliteEngine``. Each flow is typed against the few methods it uses
(engines/roles.py: ``Searcher``, ``ChunkStore``, ``QueueStore``,
``WorkerStore``); the embedded engine's in-process candidate index is a
capability of its own (``CandidateIndex``), not part of this class.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import sqlalchemy as sa

from oracle_rag.config import Settings
from oracle_rag.engines import engine_sql as q
from oracle_rag.engines import generation_sql as gq
from oracle_rag.engines import guarded_scope_sql
from oracle_rag.engines.generations import (
    LIVE,
    SLOTS,
    Generation,
    model_literal,
    needs_generation,
    render,
    slot_value,
)
from oracle_rag.engines.indexed_columns import INDEXED_COLUMNS
from oracle_rag.engines.records import (
    ROW_CHUNK_NO,
    ROW_INDEXED,
    ChunkWrite,
    Filters,
    GuardedAccess,
    Hit,
    KeywordHits,
    QueueRow,
    QueueStats,
    RecordAccess,
    Scope,
    StoredRecord,
    Where,
    access_params,
    chunk_params,
    embed_text,
    enqueue_params,
    facets_json,
    facets_value,
    hits,
    indexed_params,
    integers,
    lob_text,
    one_per_record,
    queue_rows,
    search_binds,
    vector_values,
    with_where,
)
from oracle_rag.engines.statements import Sql, stmt
from oracle_rag.errors import DatabaseError, wrap_driver_error
from oracle_rag.text import bm25
from oracle_rag.text.bm25 import Analysis
from oracle_rag.text.chunking import ChunkPlan, join_chunks

SQL_ROOT = Path(__file__).resolve().parent.parent / "sql"


class Engine(ABC):
    """A database the product can run on."""

    name: str  # "oracle" | "sqlite": selects the statement text and the migration folder, nowhere else
    transactional_ddl: bool
    sql_dialect_name: str  # for messages and the model-writing prompt ("Oracle", "SQLite")
    # Capabilities the engine-free code asks about instead of the engine's name.
    loads_models: bool = False  # the model is loaded into the database (DBMS_VECTOR), not run in-process
    clob_binds: bool = False  # long text binds must be typed CLOB (Oracle's VARCHAR2 limit)
    maintains_indexes: bool = False  # approximate/text indexes to rebuild and optimise (`oracle-rag index`)
    indexes_facets: bool = (
        False  # facet predicates get function-based indexes (answering/structured/facet_indexes.py)
    )
    ddl_compile_warnings: bool = (
        False  # PL/SQL DDL can "succeed" with compile errors, seen only on a raw cursor
    )
    # One write lock for the whole database (SQLite): the worker picks, loads and
    # embeds a batch outside it (embed_texts) and holds it only to write the
    # precomputed vectors (indexing/worker.py). False: a batch is one transaction, the
    # text embedded in SQL, rows locked one by one (Oracle).
    prepared_writes: bool = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._sa: sa.Engine | None = None

    # -- connections -----------------------------------------------------
    @property
    def sa_engine(self) -> sa.Engine:
        if self._sa is None:
            self._sa = self._create_sa_engine()
        return self._sa

    @abstractmethod
    def _create_sa_engine(self) -> sa.Engine: ...

    def _connection(self) -> sa.Connection:
        """A pooled connection; only a failure here is reported as a connection failure."""
        try:
            return self.sa_engine.connect()
        except sa.exc.DBAPIError as exc:
            raise wrap_driver_error(exc, f"{self.name} connection") from None

    @contextmanager
    def begin(self) -> Iterator[sa.Connection]:
        """A connection in a transaction, committed on success."""
        with self._connection() as conn:
            try:
                with conn.begin():
                    yield conn
            except sa.exc.DBAPIError as exc:
                raise wrap_driver_error(exc, f"{self.name} transaction") from None

    @contextmanager
    def connect(self) -> Iterator[sa.Connection]:
        """A connection; a statement that fails inside is reported as a statement, not a connection."""
        with self._connection() as conn:
            try:
                yield conn
            except sa.exc.DBAPIError as exc:
                raise wrap_driver_error(exc, f"{self.name} statement") from None

    @contextmanager
    def begin_exclusive(self) -> Iterator[sa.Connection]:
        """A transaction that reads and then writes, draining the queue among them (SQLite:
        BEGIN IMMEDIATE)."""
        with self.begin() as conn:
            yield conn

    @contextmanager
    def worker_slot(self) -> Iterator[None]:
        """Held by a worker for one prepared batch (``prepared_writes``), from the pick to the commit.

        Two workers then never prepare the same queue rows: with the pick
        outside the write transaction, nothing else keeps them apart. Engines
        whose pick locks its rows (Oracle: SKIP LOCKED) need no slot.
        """
        yield

    sql_dialect = "sqlite"  # sqlglot dialect used to classify untrusted SQL

    @abstractmethod
    def guarded_access(self) -> GuardedAccess:
        """Where untrusted (model-written) SQL may run: never this engine's own connections.

        ``answering/aggregate/executors.py`` builds the guarded executor on it; the
        engine only says which database access is the read-only one.
        """

    def observe_embedding(self, observe: Callable[[float], None]) -> bool:
        """Report each in-process embedding's duration (seconds) to ``observe`` (``/metrics``).

        True once hooked in, or when there is nothing to time (this engine
        embeds inside the database); False when it cannot be yet (the model
        does not load): the caller tries again later.
        """
        return True

    def bind_value(self, value: Any) -> Any:
        """A Python value as this engine stores it (SQLite keeps dates as ISO text)."""
        return value

    def dispose(self) -> None:
        if self._sa is not None:
            self._sa.dispose()
            self._sa = None

    # -- migrations ------------------------------------------------------
    def migrations_dir(self, migration_set: str = "rag") -> Path:
        base = SQL_ROOT / self.name
        return base if migration_set == "rag" else base / migration_set

    @abstractmethod
    def split_script(self, script: str) -> list[str]: ...

    def render_migration(self, script: str) -> str:
        """Fill placeholders in a migration template (the guarded views' access predicate)."""
        return guarded_scope_sql.render(script, self.name)

    # -- the product's own work next to running writers and access policies ----
    def prepare_ddl(self, conn: sa.Connection) -> None:
        """Before DDL on a table workers write: wait for their open transactions rather than fail (Oracle)."""
        del conn  # SQLite: one writer at a time, DDL waits on the database lock like any write

    def writers_active(self) -> bool:
        """True when a session holds uncommitted writes on the chunk tables right now (a worker mid-batch)."""
        return False

    def require_system_access(self, conn: sa.Connection, doing: str) -> None:
        """Refuse ``doing`` on a session an access policy would leave blind (Oracle VPD without a context)."""
        del conn, doing  # no row-level policies here

    def history_ddl(self) -> list[str]:
        return [self.text(q.HISTORY_DDL)]

    # -- embedding -------------------------------------------------------
    @abstractmethod
    def model_status(self, conn: sa.Connection) -> dict[str, Any]:
        """Where the model is, whether it loads, its dimension."""

    # -- statements -------------------------------------------------------
    def text(self, sql: Sql, gen: Generation | None = None) -> str:
        """This engine's text of ``sql``; a statement over vectors gets ``gen``'s column and model.

        Such a statement without a generation is refused: which model's
        vectors it reads is never left to a default.
        """
        text: str | None = getattr(sql, self.name)
        if text is None:
            raise NotImplementedError(f"statement has no {self.sql_dialect_name} text: {sql!r:.120}")
        if needs_generation(text):
            if gen is None:
                raise ValueError(f"statement over vectors needs a model generation: {text!r:.80}")
            return render(text, gen, self.name)
        return text

    def statement(self, sql: Sql, where: Where | None = None, gen: Generation | None = None) -> sa.TextClause:
        """``sql`` as an executable, cached ``text()`` for this engine (``where`` in its marker,
        ``gen``'s vectors)."""
        return stmt(
            with_where(self.text(sql, gen), where), sql.expanding, sql.clobs if self.clob_binds else ()
        )

    # -- model generations (generations.py) ---------------------------------
    def generations(self, conn: sa.Connection) -> list[Generation]:
        """Every registered generation, oldest first."""
        return [Generation.from_row(r) for r in conn.execute(self.statement(gq.GENERATIONS))]

    def active_generation(self, conn: sa.Connection) -> Generation:
        """The generation searches read, in ``conn``'s transaction (a flip elsewhere is seen at once)."""
        row = conn.execute(self.statement(gq.ACTIVE_GENERATION)).first()
        if row is None:
            raise DatabaseError("no active model generation (RAG_MODEL_GENERATION): run `oracle-rag migrate`")
        return Generation.from_row(row)

    def live_generations(self, conn: sa.Connection) -> dict[int, Generation]:
        """Slot -> the generation every chunk write embeds for (ACTIVE and STANDBY)."""
        return {g.slot: g for g in self.generations(conn) if g.state in LIVE}

    def missing_vectors(self, conn: sa.Connection, gen: Generation) -> int:
        """Chunks without a vector of ``gen`` (what its fill still has to do)."""
        return int(
            conn.execute(
                self.statement(gq.MISSING, gen=gen), {"generation_id": gen.generation_id}
            ).scalar_one()
        )

    def chunk_total(self, conn: sa.Connection) -> int:
        return int(conn.execute(self.statement(gq.CHUNK_TOTAL)).scalar_one())

    def fill_pick(self, conn: sa.Connection, gen: Generation, limit: int) -> list[tuple[int, str]]:
        """Up to ``limit`` chunks lacking ``gen``'s vector: (CHUNK_ID, CONTENT)."""
        rows = conn.execute(
            self.statement(gq.FILL_PICK, gen=gen), {"generation_id": gen.generation_id, "limit": limit}
        ).fetchall()
        return [(int(r[0]), lob_text(r[1])) for r in rows]

    def fill_write(
        self,
        conn: sa.Connection,
        gen: Generation,
        chunks: Sequence[tuple[int, str]],
        vectors: Mapping[str, bytes] | None = None,
    ) -> int:
        """Write ``gen``'s vectors of picked chunks; returns how many were written.

        ``vectors`` (keyed by the passage text) when embedded beforehand;
        otherwise the statement embeds. A chunk edited, already filled or
        whose generation was dropped meanwhile is left alone.
        """
        if not chunks:
            return 0
        params = []
        for chunk_id, content in chunks:
            text = embed_text(gen.passage_text(content))
            p: dict[str, Any] = {
                "chunk_id": chunk_id,
                "generation_id": gen.generation_id,
                "content": content,
                "embed_text": text,
            }
            if vectors is not None:
                p["embedding"] = vectors[text]
            params.append(p)
        written = 0
        statement = self.statement(gq.STORE_FILLED, gen=gen)
        for p in params:
            written += int(conn.execute(statement, p).rowcount or 0)
        return written

    def embed_passages(self, gen: Generation, contents: Sequence[str]) -> dict[str, bytes]:
        """``gen``'s vectors of chunk contents, computed in this process (``prepared_writes`` engines)."""
        raise NotImplementedError(f"the {self.sql_dialect_name} engine embeds inside the database")

    def build_vector_index(self, gen: Generation) -> str:
        """Build ``gen``'s vector index before searches read it; says what was done.

        Oracle: the IVF/HNSW index on its column. Here: nothing persistent
        (the embedded engine's in-process index is built by each process on
        its first search of the generation).
        """
        return "no persistent vector index on this engine"

    def drop_vector_index(self, gen: Generation) -> None:
        """Drop ``gen``'s vector index (its generation is being dropped)."""
        del gen  # nothing persistent on this engine

    def load_generation_model(self, gen: Generation) -> str | None:
        """Make ``gen``'s model runnable here; returns its file's fingerprint (None if unknown)."""
        raise NotImplementedError

    def embed_with(self, conn: sa.Connection, gen: Generation, text: str) -> list[float]:
        """Embed one query text with ``gen``'s model, in the database."""
        return vector_values(
            conn.execute(self.statement(q.EMBED, gen=gen), {"text": gen.query_text(text)}).scalar_one()
        )

    def upsert_statement(self, live: Mapping[int, Generation], bound: Mapping[int, bool]) -> sa.TextClause:
        """The chunk upsert writing each live generation's vector (``bound``: a precomputed one)."""
        text = self.text(q.UPSERT_CHUNK)
        for slot in SLOTS:
            gen = live.get(slot)
            if gen is None:
                fragment = gq.BLANK[self.name][slot]
            elif bound.get(slot):
                fragment = gq.BOUND_VALUE.replace("{slot}", str(slot))
            else:
                fragment = (
                    gq.EMBED_VALUE[self.name]
                    .replace("{slot}", str(slot))
                    .replace("{model}", model_literal(gen, self.name))
                )
            text = slot_value(text, slot, fragment)
        return stmt(text, q.UPSERT_CHUNK.expanding, q.UPSERT_CHUNK.clobs if self.clob_binds else ())

    @property
    def model_label(self) -> str:
        """The embedding model as status output names it."""
        return "all-MiniLM-L6-v2 (in-process)"

    def script_statement(self, sql: str) -> str:
        """``sql`` terminated as it would appear in a script for this engine (sqlite3 here)."""
        return sql if sql.rstrip().endswith(";") else sql + ";"

    def trigger_scripts_dir(self) -> Path:
        return SQL_ROOT / self.name / "triggers"

    # -- chunks -----------------------------------------------------------
    def read_chunk_state(
        self, conn: sa.Connection, source_type: str, ids: Sequence[str]
    ) -> dict[str, StoredRecord]:
        """What is stored per record (from its chunk 0), for the indexer's skip test."""

        def stored_facets(raw: Any) -> str:
            # JSON text was written by facets_json: compare it as it is (a
            # text in another form reads as a change and is rewritten once,
            # with no embedding). Oracle's native JSON comes back as a dict.
            if isinstance(raw, str):
                return raw
            return facets_json(facets_value(raw))

        def num(v: Any) -> int | None:
            return None if v is None else int(v)

        # SOURCE_ID, CONTENT_HASH, OWNER_ID, the indexed facet columns, FACETS, TERM_COUNT, access
        facets_at = 3 + len(INDEXED_COLUMNS)
        out: dict[str, StoredRecord] = {}
        for start in range(0, len(ids), 500):
            part = [str(i) for i in ids[start : start + 500]]
            rows = conn.execute(self.statement(q.READ_CHUNK_STATE), {"source_type": source_type, "ids": part})
            out.update(
                {
                    str(r[0]): StoredRecord(
                        r[1],
                        num(r[2]),
                        integers(r[3:facets_at]),
                        stored_facets(r[facets_at]),
                        r[facets_at + 1] is not None,
                        RecordAccess.stored(r[facets_at + 2], r[facets_at + 3], r[facets_at + 4]),
                    )
                    for r in rows
                }
            )
        return out

    def chunk_ids(self, conn: sa.Connection, source_type: str) -> set[str]:
        return {str(r[0]) for r in conn.execute(self.statement(q.CHUNK_IDS), {"source_type": source_type})}

    def queued_ids(self, conn: sa.Connection, source_type: str) -> set[str]:
        return {str(r[0]) for r in conn.execute(self.statement(q.QUEUED_IDS), {"source_type": source_type})}

    def embed_texts(self, texts: Sequence[str]) -> dict[int, dict[str, bytes]]:
        """Each distinct chunk text's vector for every live generation (generation id -> passage
        text -> vector), computed outside any transaction.

        Only for ``prepared_writes`` engines (the model runs in this process);
        the others embed inside their upsert statement.
        """
        raise NotImplementedError(f"the {self.sql_dialect_name} engine embeds inside the database")

    def upsert_chunks(
        self,
        conn: sa.Connection,
        chunks: Sequence[ChunkWrite],
        vectors: Mapping[int, Mapping[str, bytes]] | None = None,
    ) -> int:
        """Embed and write chunks for every live generation; a chunk 0 with an analysis also
        replaces the record's postings.

        ``vectors`` (from :meth:`embed_texts`: generation id -> passage text ->
        vector) are written as they are instead of embedding in the statement.
        """
        if not chunks:
            return 0
        params = chunk_params(chunks)
        # The live generations as this transaction sees them: a switch committed
        # after the vectors were computed leaves its slot empty (stamp NULL) for
        # the fill; vectors of a generation dropped meanwhile are not written.
        live = self.live_generations(conn)
        written = {slot: gen for slot, gen in live.items() if vectors is None or gen.generation_id in vectors}
        bound = {slot: vectors is not None for slot in written}
        for p in params:
            for slot in SLOTS:
                gen = written.get(slot)
                p[f"generation_{slot}"] = None if gen is None else gen.generation_id
                if gen is None:
                    continue
                text = embed_text(gen.passage_text(p["content"]))
                if vectors is None:
                    p[f"embed_text_{slot}"] = text
                else:
                    p[f"embedding_{slot}"] = vectors[gen.generation_id][text]
        conn.execute(self.upsert_statement(written, bound), params)
        self._write_acl(
            conn, [(c.source_type, c.source_id, c.record_access) for c in chunks if c.chunk_no == 0]
        )
        self._write_postings(
            conn,
            [
                (c.source_type, c.source_id, c.analysis)
                for c in chunks
                if c.analysis is not None and c.chunk_no == 0
            ],
        )
        # A chunk 0 written without an analysis leaves its record unanalysed (TERM_COUNT NULL):
        # no postings either, so the keyword statement, which reads only the postings, skips it.
        unanalysed = [
            {"source_type": c.source_type, "source_id": c.source_id}
            for c in chunks
            if c.analysis is None and c.chunk_no == 0
        ]
        if unanalysed:
            conn.execute(self.statement(q.DELETE_TERMS), unanalysed)
        return len(chunks)

    def write_analyses(self, conn: sa.Connection, records: Sequence[tuple[str, str, Analysis]]) -> int:
        """Store records' BM25 analyses (length + postings) without touching their embeddings."""
        if not records:
            return 0
        conn.execute(
            self.statement(q.UPDATE_TERM_COUNT),
            [{"source_type": t, "source_id": i, "term_count": a.length} for t, i, a in records],
        )
        self._write_postings(conn, records)
        return len(records)

    def analyse_pending(self, plan: ChunkPlan, batch: int = 500) -> int:
        """Analyse every record whose chunk 0 has no analysis, from its stored chunks; no embedding.

        The migration that changes the analyser (accent folding) resets every
        record's TERM_COUNT; this rewrites their postings from CONTENT (the
        chunks joined back into the record's text), a batch per transaction,
        so keyword search finds them again without a source read or an
        embedding. Returns the number of records analysed.
        """
        done, after = 0, 0
        while True:
            with self.begin() as conn:
                ids = [
                    int(r[0])
                    for r in conn.execute(
                        self.statement(q.UNANALYSED_RECORDS), {"after": after, "limit": batch}
                    )
                ]
                if not ids:
                    return done
                texts: dict[int, tuple[str, str, list[str]]] = {}
                for rid, source_type, source_id, content in conn.execute(
                    self.statement(q.ANALYSIS_TEXTS), {"ids": ids}
                ):
                    texts.setdefault(int(rid), (str(source_type), str(source_id), []))[2].append(
                        lob_text(content)
                    )
                self.write_analyses(
                    conn,
                    [(t, i, bm25.analyze_record(join_chunks(parts, plan))) for t, i, parts in texts.values()],
                )
            done += len(texts)
            after = ids[-1]

    def _write_postings(self, conn: sa.Connection, records: Sequence[tuple[str, str, Analysis]]) -> None:
        if not records:
            return
        conn.execute(
            self.statement(q.DELETE_TERMS), [{"source_type": t, "source_id": i} for t, i, _ in records]
        )
        rows = [
            {"source_type": t, "source_id": i, "term": term, "tf": tf}
            for t, i, a in records
            for term, tf in a.terms
        ]
        if rows:
            conn.execute(self.statement(q.INSERT_TERM), rows)

    def rescope(self, conn: sa.Connection, records: Sequence[tuple[Any, ...]]) -> int:
        """Rewrite the scope columns, facets and access of every chunk of records: (type, id, owner,
        indexed facet columns' values, facets JSON[, access]). No embedding: the text did not change."""
        if not records:
            return 0
        rows = [
            (r[0], r[1], r[2], tuple(r[3]), r[4], r[5] if len(r) > 5 else RecordAccess.legacy(r[2]))
            for r in records
        ]
        params = [
            {
                "source_type": t,
                "source_id": i,
                "owner_id": o,
                **indexed_params(x),
                "facets": f,
                **access_params(a),
            }
            for t, i, o, x, f, a in rows
        ]
        conn.execute(self.statement(q.UPDATE_SCOPE), params)
        conn.execute(
            self.statement(q.UPDATE_TERM_SCOPE), [{"source_type": r[0], "source_id": r[1]} for r in rows]
        )
        self._write_acl(conn, [(t, i, a) for t, i, _o, _x, _f, a in rows])
        return len(records)

    def write_access(self, conn: sa.Connection, records: Sequence[tuple[str, str, RecordAccess]]) -> int:
        """Rewrite only the access of records (type, id, access): an ACL change, no embedding."""
        if not records:
            return 0
        conn.execute(
            self.statement(q.UPDATE_ACCESS),
            [{"source_type": t, "source_id": i, **access_params(a)} for t, i, a in records],
        )
        conn.execute(
            self.statement(q.UPDATE_TERM_SCOPE), [{"source_type": t, "source_id": i} for t, i, _ in records]
        )
        self._write_acl(conn, records)
        return len(records)

    def _write_acl(self, conn: sa.Connection, records: Sequence[tuple[str, str, RecordAccess]]) -> None:
        """Replace the RAG_CHUNK_ACL rows of records with their groups."""
        if not records:
            return
        conn.execute(
            self.statement(q.DELETE_ACL), [{"source_type": t, "source_id": i} for t, i, _ in records]
        )
        rows = [{"source_type": t, "source_id": i, "principal": g} for t, i, a in records for g in a.groups]
        if rows:
            conn.execute(self.statement(q.INSERT_ACL), rows)

    def source_access(
        self, conn: sa.Connection, source_type: str
    ) -> dict[str, tuple[int | None, RecordAccess]]:
        """Every record of a source: its owner and its stored access (an ACL refresh compares them)."""
        rows = conn.execute(self.statement(q.SOURCE_ACCESS), {"source_type": source_type})
        return {
            str(r[0]): (None if r[1] is None else int(r[1]), RecordAccess.stored(r[2], r[3], r[4]))
            for r in rows
        }

    def access_failures(self, conn: sa.Connection) -> dict[str, str | None]:
        """Sources hidden from callers without see-all because their permission data failed to read."""
        return {str(r[0]): r[2] for r in conn.execute(self.statement(q.ACCESS_FAILURES))}

    def set_access_failure(
        self, conn: sa.Connection, source_type: str, failed_at: str | None, error_code: str | None = None
    ) -> None:
        """Record (``failed_at`` set) or clear (None) a source's permission-data failure."""
        if failed_at is None:
            conn.execute(self.statement(q.CLEAR_ACCESS_FAILURE), {"source_type": source_type})
        else:
            conn.execute(
                self.statement(q.RECORD_ACCESS_FAILURE),
                {"source_type": source_type, "failed_at": failed_at, "error_code": error_code},
            )

    def delete_chunks(self, conn: sa.Connection, source_type: str, ids: Sequence[str]) -> int:
        """Delete every chunk of the given records; returns the number of chunks deleted."""
        if not ids:
            return 0
        params = [{"source_type": source_type, "source_id": str(i)} for i in ids]
        conn.execute(self.statement(q.DELETE_ACL), params)
        return int(conn.execute(self.statement(q.DELETE_CHUNK), params).rowcount or 0)

    def trim_chunks(self, conn: sa.Connection, counts: Sequence[tuple[str, str, int]]) -> int:
        """Drop the chunks a record no longer has: ``counts`` is (type, id, new chunk count)."""
        if not counts:
            return 0
        params = [{"source_type": t, "source_id": str(i), "chunk_count": int(n)} for t, i, n in counts]
        return int(conn.execute(self.statement(q.DELETE_EXTRA_CHUNKS), params).rowcount or 0)

    # -- queue -----------------------------------------------------------
    def enqueue(self, conn: sa.Connection, source_type: str, source_id: str, action: str) -> None:
        self.enqueue_many(conn, [(source_type, source_id, action)])

    def enqueue_many(self, conn: sa.Connection, items: Sequence[tuple[str, str, str]]) -> int:
        rows = enqueue_params(items)
        if rows:
            conn.execute(self.statement(q.ENQUEUE), rows)
        return len(rows)

    @abstractmethod
    def pick(self, conn: sa.Connection, limit: int, max_attempts: int) -> list[QueueRow]: ...

    def delete_queue_rows(self, conn: sa.Connection, dirty_ids: Sequence[int]) -> int:
        if not dirty_ids:
            return 0
        params = [{"dirty_id": i} for i in dirty_ids]
        return int(conn.execute(self.statement(q.DELETE_QUEUE_ROW), params).rowcount or 0)

    def queue_rows_present(self, conn: sa.Connection, dirty_ids: Sequence[int]) -> set[int]:
        """Which of ``dirty_ids`` are still queued (the prepared batch's re-check before it writes)."""
        if not dirty_ids:
            return set()
        ids = json.dumps([int(i) for i in dirty_ids])
        return {int(r[0]) for r in conn.execute(self.statement(q.QUEUE_ROWS_PRESENT), {"ids": ids})}

    def fail_queue_rows(self, conn: sa.Connection, dirty_ids: Sequence[int], error: str) -> int:
        if not dirty_ids:
            return 0
        params = [{"dirty_id": i, "error": error[:1000]} for i in dirty_ids]
        return int(conn.execute(self.statement(q.FAIL_QUEUE_ROW), params).rowcount or 0)

    def retry_failed(self, conn: sa.Connection, max_attempts: int) -> int:
        return int(conn.execute(self.statement(q.RETRY_FAILED), {"max_attempts": max_attempts}).rowcount or 0)

    def list_queue(
        self, conn: sa.Connection, *, failed_only: bool, max_attempts: int, limit: int
    ) -> list[QueueRow]:
        binds = {"failed_only": 1 if failed_only else 0, "max_attempts": max_attempts, "limit": limit}
        return queue_rows(conn.execute(self.statement(q.LIST_QUEUE), binds).fetchall())

    def queue_stats(self, conn: sa.Connection, max_attempts: int) -> QueueStats:
        row = conn.execute(self.statement(q.QUEUE_STATS), {"max_attempts": max_attempts}).one()
        by_type = {r[0]: int(r[1]) for r in conn.execute(self.statement(q.CHUNKS_BY_TYPE))}
        return QueueStats(
            depth=int(row[0] or 0),
            oldest_age_s=None if row[4] is None else float(row[4]),
            stalled=int(row[2] or 0),
            failed=int(row[3] or 0),
            chunks_by_type=by_type,
        )

    def embed(self, conn: sa.Connection, text: str) -> list[float]:
        """Embed one query text in the database with the active generation's model (status, parity tests)."""
        return self.embed_with(conn, self.active_generation(conn), text)

    def embed_many(self, texts: Sequence[str], kind: str) -> np.ndarray:
        """Embed a few texts with the active generation's model (a question, an answer's candidate
        sentences), in order, each with the prefix that model expects for ``kind`` ("query" or
        "passage", :meth:`Generation.text_as`): e5 compares a "query: " with "passage: " texts.

        Here one statement per text; an engine whose model runs in this process embeds them in
        one batched run instead."""
        with self.connect() as conn:
            gen = self.active_generation(conn)
            prefixed = [gen.text_as(kind, t) for t in texts]
            rows = [
                vector_values(conn.execute(self.statement(q.EMBED, gen=gen), {"text": t}).scalar_one())
                for t in prefixed
            ]
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)

    # -- search ----------------------------------------------------------
    # A record may have several chunks: a chunk-level top list of k x this
    # many rows is cut to its best chunk per record; when that leaves fewer
    # than k records although more rows exist, the record-level statement runs
    # (the embedded engine's cache asks for four times as many instead).
    semantic_fanout = 2

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
        """The ``k`` records nearest to ``query`` (one hit each: its nearest chunk).

        ``text=False`` allows hits without content (``shown_chunks`` fills
        them in later); this statement returns it anyway.
        """

        template = q.SEMANTIC_SEARCH_EXACT if exact else q.SEMANTIC_SEARCH
        gen = self.active_generation(conn)
        query = gen.query_text(query)
        fetch = k * self.semantic_fanout
        rows = hits(
            conn.execute(
                self.statement(template, where, gen),
                search_binds(scope, filters, where, query=query, k=fetch),
            ).fetchall()
        )
        best = one_per_record(rows)
        if len(best) >= k or len(rows) < fetch:
            return best[:k]
        return hits(
            conn.execute(
                self.statement(q.SEMANTIC_RECORDS, where, gen),
                search_binds(scope, filters, where, query=query, k=k),
            ).fetchall()
        )

    def bm25_params(self) -> Any:
        return bm25.Bm25Params(self.settings.bm25_k1, self.settings.bm25_b)

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
        """The ``k`` best records by BM25 (text/bm25.py) over the records this search may return, ranked
        in SQL.

        N, the average length and each term's document frequency come from
        the visible records only (scope, filters and ``where`` applied in
        SQL), so the ranking is a function of what the caller may see. The
        score is computed in the database (``engine_sql.keyword_top``): only
        the best ``k`` records and one row per query term come back.
        """

        terms = bm25.query_terms(query)
        if not terms:
            return []
        binds = {**search_binds(scope, filters, where), **q.keyword_binds(terms), "k": k}
        params = self.bm25_params()
        binds.update(k1=params.k1, b=params.b)
        stats = self.keyword_stats(conn, scope, filters, where)
        if stats is not None:
            binds.update(n=stats.n, total_length=stats.total_length)
        statement = q.keyword_top(len(terms), stats_bound=stats is not None, joined=where is not None)
        rows = conn.execute(self.statement(statement, where), binds).fetchall()
        scores: dict[int, float] = {}
        weights: dict[str, float] = {}
        for chunk_id, score, term, df, n in rows:
            if term is None:
                scores[int(chunk_id)] = float(score)
            else:
                weights[str(term)] = bm25.idf(int(n), int(df))
        found, _ = self.record_passages(
            conn, bm25.top(scores, k), terms, weights, scope, filters, where, text=text
        )
        return found

    def keyword_stats(
        self, conn: sa.Connection, scope: Scope, filters: Filters, where: Where | None
    ) -> bm25.Stats | None:
        """The visible set's N and total length when this engine knows them without a scan; else None.

        None (here): the keyword statement computes them itself from the
        visible records. Both engines answer: the embedded one from its
        per-scope cache, Oracle from its server result cache.
        """
        return None

    def record_passages(
        self,
        conn: sa.Connection,
        best: Sequence[tuple[int, float]],
        terms: Mapping[str, int],
        weights: Mapping[str, float],
        scope: Scope,
        filters: Filters,
        where: Where | None,
        lengths: Mapping[int, int] | None = None,
        text: bool = True,
    ) -> tuple[list[Hit], bool]:
        """The best records (chunk 0 ids, scores) as hits, scope re-applied in SQL.

        Each hit is the record's chunk holding most of the query (its
        passage), scored with the record's score. The flag is False when SQL
        dropped a record or (given ``lengths``) disagrees on its length.
        Without ``text`` each hit is the record's chunk 0 with no content, in
        a :class:`KeywordHits` that can choose the passages later (hybrid
        search shows only its fused top k).
        """

        if not text:
            return self._record_keys(conn, best, terms, weights, scope, filters, where, lengths)
        if not best:
            return [], True
        rows = conn.execute(
            self.statement(q.KEYWORD_PASSAGES, where),
            search_binds(scope, filters, where, ids=[rid for rid, _ in best]),
        ).fetchall()
        return _passages(_by_record(rows, lengths), best, terms, weights)

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
    ) -> tuple[dict[int, tuple[str, dict[str, Any]]], list[Hit], bool]:
        """The text and facets of ``chunk_ids``, and :meth:`record_passages` of ``best``, in one statement.

        Hybrid search shows its fused top k this way (search/hybrid.py shown_with_text),
        the scope re-applied: a chunk deleted or no longer visible is absent
        from the texts. The flag is False when SQL dropped a chunk or a
        record, or (given ``lengths``) disagrees on a record's length.
        """
        if not chunk_ids and not best:
            return {}, [], True
        ids = list(dict.fromkeys([*chunk_ids, *(rid for rid, _ in best)]))
        rows = conn.execute(
            self.statement(q.SHOWN_CHUNKS, where),
            search_binds(scope, filters, where, ids=ids, passage_ids=[rid for rid, _ in best]),
        ).fetchall()
        wanted = set(chunk_ids)
        records = {rid for rid, _ in best}
        texts = {
            int(r[0]): (lob_text(r[3]), facets_value(r[9]))
            for r in rows
            if int(r[0]) == int(r[10]) and int(r[0]) in wanted
        }
        passages, complete = _passages(
            _by_record([r for r in rows if int(r[10]) in records], lengths), best, terms, weights
        )
        return texts, passages, complete and len(texts) == len(wanted)

    def _record_keys(
        self,
        conn: sa.Connection,
        best: Sequence[tuple[int, float]],
        terms: Mapping[str, int],
        weights: Mapping[str, float],
        scope: Scope,
        filters: Filters,
        where: Where | None,
        lengths: Mapping[int, int] | None,
    ) -> tuple[KeywordHits, bool]:
        """``record_passages`` without text: one row per record, no chunk read, no passage chosen."""
        if not best:
            return KeywordHits([], terms, weights), True
        rows = {
            int(r[10]): r
            for r in conn.execute(
                self.statement(q.KEYS_OF_RECORDS, where),
                search_binds(scope, filters, where, ids=[rid for rid, _ in best]),
            )
        }
        out = []
        complete = True
        for rid, value in best:
            r = rows.get(rid)
            if r is None:  # gone since the postings were read, or no longer visible
                complete = False
                continue
            if lengths is not None and int(r[4]) != lengths.get(rid):
                complete = False
            out.append(
                Hit(
                    rid,
                    r[1],
                    str(r[2]),
                    "",
                    value,
                    None if r[5] is None else int(r[5]),
                    integers(r[ROW_INDEXED]),
                    int(r[ROW_CHUNK_NO]),
                )
            )
        return KeywordHits(out, terms, weights), complete


def _by_record(rows: Sequence[Any], lengths: Mapping[int, int] | None) -> tuple[dict[int, list[Hit]], bool]:
    """KEYWORD_PASSAGES rows as hits per record (its chunk 0 id); False if a length differs
    from ``lengths``."""
    chunks: dict[int, list[Hit]] = {}
    agree = True
    for row, hit in zip(rows, hits(rows), strict=True):
        rid = int(row[10])
        chunks.setdefault(rid, []).append(hit)
        if lengths is not None and int(row[4]) != lengths.get(rid):
            agree = False
    return chunks, agree


def _passages(
    found: tuple[dict[int, list[Hit]], bool],
    best: Sequence[tuple[int, float]],
    terms: Mapping[str, int],
    weights: Mapping[str, float],
) -> tuple[list[Hit], bool]:
    """Each record of ``best`` as its passage (the chunk holding most of the query), scored with the
    record's score."""
    chunks, complete = found
    out = []
    for rid, value in best:
        passages = chunks.get(rid)
        if not passages:  # gone since the postings were read, or no longer visible
            complete = False
            continue
        chosen = (
            passages[0]
            if len(passages) == 1
            else max(passages, key=lambda h: (bm25.passage_weight(terms, h.content, weights), -h.chunk_no))
        )
        out.append(replace(chosen, score=value))
    return out, complete
