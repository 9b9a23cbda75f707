"""The production engine: Oracle Database 23ai/26ai AI Vector Search.

Embedding happens inside the database (``VECTOR_EMBEDDING`` over an ONNX
model loaded with ``DBMS_VECTOR``); the queue is drained with ``FOR UPDATE
SKIP LOCKED`` so workers scale horizontally (a MERGE race between two of them
is retried, :meth:`OracleEngine.upsert_chunks`).
Its statements are the ``oracle`` side of the ``Sql`` objects in the ``*_sql.py`` modules.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from oracle_rag.config import Settings
from oracle_rag.engines import engine_sql as q
from oracle_rag.engines import generation_sql as gq
from oracle_rag.engines.base import Engine
from oracle_rag.engines.generations import Generation
from oracle_rag.engines.oracle import index_sql as iq
from oracle_rag.engines.oracle import vpd_sql as vpd
from oracle_rag.engines.oracle.vpd import install_vpd_context
from oracle_rag.engines.records import (
    ChunkWrite,
    Filters,
    Hit,
    QueueRow,
    ReadOnlyUser,
    Scope,
    Where,
    lob_text,
    queue_rows,
    search_binds,
)
from oracle_rag.errors import ConfigurationError, RagError, driver_error_code
from oracle_rag.sql_scripts import is_plsql, split_oracle_script
from oracle_rag.text.bm25 import Stats
from oracle_rag.tracing import tag_oracle_sessions

log = logging.getLogger("oracle_rag.engines.oracle.engine")

UNIQUE_VIOLATION = "ORA-00001"


def is_unique_violation(exc: BaseException) -> bool:
    """True for ORA-00001 (unique constraint violated), wrapped by SQLAlchemy or not."""
    return driver_error_code(exc) == UNIQUE_VIOLATION


def output_type_handler(previous: Any) -> Any:
    """A connection's output type handler: LOBs as str/bytes, VECTOR as a list, the rest to ``previous``.

    Per connection, never ``oracledb.defaults.fetch_lobs``: that is process-wide
    and would change the driver of a host application that embeds oracle-rag.
    The LOB mapping is python-oracledb's own recipe (user guide, "Fetching LOBs
    as Strings and Bytes": ``cursor.var(DB_TYPE_LONG, arraysize=cursor.arraysize)``).
    Everything else goes to the handler that was there before (SQLAlchemy's
    dialect installs one for NUMBER), in the signature it was written for: a
    connection has one handler, so they must be chained.
    """
    import inspect

    import oracledb

    lobs = {
        oracledb.DB_TYPE_CLOB: oracledb.DB_TYPE_LONG,
        oracledb.DB_TYPE_NCLOB: oracledb.DB_TYPE_LONG_NVARCHAR,
        oracledb.DB_TYPE_BLOB: oracledb.DB_TYPE_LONG_RAW,
    }
    legacy = previous is not None and len(inspect.signature(previous).parameters) == 6

    def handler(cursor: Any, metadata: Any) -> Any:
        code = metadata.type_code
        if code in lobs:
            return cursor.var(lobs[code], arraysize=cursor.arraysize)
        if code is oracledb.DB_TYPE_VECTOR:
            return cursor.var(code, arraysize=cursor.arraysize, outconverter=list)
        if previous is None:
            return None
        if legacy:  # (cursor, name, default_type, size, precision, scale), as SQLAlchemy 2.0 writes it
            return previous(
                cursor, metadata.name, code, metadata.internal_size, metadata.precision, metadata.scale
            )
        return previous(cursor, metadata)

    return handler


def install_type_handlers(engine: sa.Engine) -> None:
    """Chain :func:`output_type_handler` onto every new DBAPI connection of ``engine``.

    Registered after ``create_engine``, so it runs after the dialect's own
    on-connect hook and wraps the handler that hook set.
    """

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.outputtypehandler = output_type_handler(dbapi_conn.outputtypehandler)


_ORGANIZATION = {
    "IVF": "NEIGHBOR PARTITIONS",
    "HNSW": "INMEMORY NEIGHBOR GRAPH",
}


class OracleEngine(Engine):
    name = "oracle"
    transactional_ddl = False  # Oracle commits each DDL statement implicitly
    loads_models = True
    clob_binds = True
    maintains_indexes = True  # the vector index (IVF centroids fixed at build time)
    indexes_facets = True  # JSON_VALUE function-based indexes on the declared facets
    ddl_compile_warnings = True  # CREATE TRIGGER with errors: DPY-7000 warning, USER_ERRORS rows

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        if not settings.database_url:
            raise ConfigurationError("database_url: required for the Oracle engine", key="database_url")
        self.model = settings.embedding_model.upper()

    sql_dialect = "oracle"
    sql_dialect_name = "Oracle"

    def guarded_access(self) -> ReadOnlyUser:
        """A pool for the least-privilege read-only user (never the schema owner)."""
        url = self.settings.aggregate_database_url
        if not url:
            raise ConfigurationError(
                "aggregate_database_url: aggregate questions on Oracle need the read-only user's URL "
                "(see local/README.md); the schema owner is never used for model-written SQL",
                key="aggregate_database_url",
            )
        password = os.environ.get(self.settings.aggregate_db_password_env)
        engine = sa.create_engine(
            url,
            connect_args={"password": password} if password else {},
            pool_size=2,
            max_overflow=0,
            pool_pre_ping=True,
            hide_parameters=True,
        )
        install_type_handlers(engine)
        tag_oracle_sessions(engine)  # MODULE/ACTION/CLIENT_INFO join V$SESSION to the trace
        return ReadOnlyUser(engine)

    @property
    def model_label(self) -> str:
        return self.settings.embedding_model

    def script_statement(self, sql: str) -> str:
        """SQL*Plus terminators: ``;`` after SQL, ``/`` on its own line after PL/SQL."""
        return sql + ("\n/" if is_plsql(sql) else ";")

    def _create_sa_engine(self) -> sa.Engine:
        connect_args: dict[str, Any] = {}
        password = self.settings.db_password()
        if password:
            connect_args["password"] = password
        engine = sa.create_engine(
            self.settings.database_url or "",
            connect_args=connect_args,
            pool_size=self.settings.pool_size,
            max_overflow=0,
            pool_pre_ping=True,
            hide_parameters=True,
        )
        install_type_handlers(engine)
        tag_oracle_sessions(engine)  # MODULE/ACTION/CLIENT_INFO join V$SESSION to the trace
        if self.settings.access_vpd:  # the VPD second wall is provisioned: every session gets a context
            install_vpd_context(engine, self.text)
        if not password and sa.engine.make_url(self.settings.database_url or "oracle+oracledb://").username:
            self._refuse_connecting_without_password(engine)
        return engine

    def _refuse_connecting_without_password(self, engine: sa.Engine) -> None:
        """A user without a password fails in the driver as a bare DPY-4001: name the variable instead.

        Checked when a connection is opened, not when the engine is made (statements
        are rendered without a database); a wallet or external login has no user in the URL.
        """
        variable = self.settings.db_password_env
        message = (
            f"database_url names a user but the environment variable {variable} (db_password_env) "
            f"is not set: export {variable}=... with that user's password"
        )

        @sa.event.listens_for(engine, "do_connect")
        def _no_password(*_args: Any) -> None:
            import os

            if not os.environ.get(variable):
                raise ConfigurationError(message, key="db_password_env")

    # -- migrations -------------------------------------------------------
    def split_script(self, script: str) -> list[str]:
        return split_oracle_script(script)

    def render_migration(self, script: str) -> str:
        kind = self.settings.vector_index_type
        accuracy = self.settings.vector_index_accuracy
        if kind not in _ORGANIZATION:
            raise ConfigurationError(
                f"vector_index_type: {kind!r} is not one of {', '.join(_ORGANIZATION)}",
                key="vector_index_type",
            )
        if not 1 <= int(accuracy) <= 100:
            raise ConfigurationError(
                "vector_index_accuracy: must be in [1, 100]", key="vector_index_accuracy"
            )
        rendered = (
            super().render_migration(script).replace("{{VECTOR_INDEX_ORGANIZATION}}", _ORGANIZATION[kind])
        )
        rendered = rendered.replace("{{VECTOR_INDEX_ACCURACY}}", str(int(accuracy)))
        rendered = rendered.replace("{{EMBEDDING_MODEL}}", q.render("{model}", self.model))
        if self.settings.vector_index_partitions and kind == "IVF":
            rendered = rendered.replace(
                f"WITH TARGET ACCURACY {int(accuracy)};",
                f"WITH TARGET ACCURACY {int(accuracy)}\n  PARAMETERS (TYPE IVF, NEIGHBOR PARTITIONS "
                f"{int(self.settings.vector_index_partitions)});",
            )
        leftover = re.search(r"\{\{[A-Z_]+\}\}", rendered)
        if leftover:
            raise ConfigurationError(
                f"migration placeholder {leftover.group(0)} has no value", key="migrations"
            )
        return rendered

    # -- embedding --------------------------------------------------------
    def model_status(self, conn: sa.Connection) -> dict[str, Any]:
        gen = self.active_generation(conn)
        row = conn.execute(self.statement(q.MODEL_STATUS), {"model_name": gen.db_model}).first()
        status: dict[str, Any] = {
            "engine": self.name,
            "model": gen.db_model,
            "location": "USER_MINING_MODELS",
            "generation": gen.generation_id,
            "present": row is not None,
        }
        if row is None:
            status["fix"] = (
                f"load it: oracle-rag model load --file {gen.model_name}.onnx --name {gen.db_model} "
                f"(or --url PAR_URL)"
            )
            return status
        status["mining_function"] = row[1]
        status["algorithm"] = row[2]
        vec = self.embed(conn, "oracle-rag status check")
        status["dimensions"] = len(vec)
        status["test_norm"] = round(sum(v * v for v in vec) ** 0.5, 6)
        return status

    # -- writes -----------------------------------------------------------
    def upsert_chunks(
        self,
        conn: sa.Connection,
        chunks: Sequence[ChunkWrite],
        vectors: Mapping[int, Mapping[str, bytes]] | None = None,
    ) -> int:
        """The MERGE of the base engine, once more when another session inserted the same keys first.

        Two workers can hold queue rows of one record (two changes, picked by
        different workers under SKIP LOCKED). Both MERGEs find no row and take
        WHEN NOT MATCHED; the second INSERT waits on the first's uncommitted
        key and then fails with ORA-00001 (on RAG_CHUNK_SOURCE_UK, or on
        RAG_CHUNK_TERM_PK for the postings). That is a benign race, not a bad
        record: the savepoint undoes this attempt and the same writes run again,
        now as WHEN MATCHED updates of the committed rows (and a delete and
        re-insert of the postings). A second ORA-00001 is raised.
        """
        try:
            with conn.begin_nested():
                return super().upsert_chunks(conn, chunks, vectors)
        except sa.exc.IntegrityError as exc:
            if not is_unique_violation(exc):
                raise
        log.info(
            "another session wrote %d chunk(s) of the same record(s) first (ORA-00001); "
            "writing them again over its rows",
            len(chunks),
        )
        return super().upsert_chunks(conn, chunks, vectors)

    # -- queue and search -------------------------------------------------
    # -- the product's own work next to running writers and access policies ----
    def prepare_ddl(self, conn: sa.Connection) -> None:
        conn.execute(self.statement(q.ALTER_SESSION_DDL_LOCK_TIMEOUT))

    def writers_active(self) -> bool:
        with self.connect() as conn:
            try:
                conn.execute(self.statement(q.LOCK_CHUNK_TABLES_NOWAIT))
            except sa.exc.DBAPIError as exc:
                code = driver_error_code(exc)
                if code == "ORA-00054":
                    return True
                if code == "ORA-00942":  # before the first migration: no tables, no writers
                    return False
                raise
            finally:
                conn.rollback()  # releases the SHARE lock at once
        return False

    def require_system_access(self, conn: sa.Connection, doing: str) -> None:
        """Refuse when VPD policies exist on the chunk tables and this session holds no system context.

        Such a session reads no RAG_CHUNK row: a worker would write records
        without postings (INSERT_TERM copies from chunk 0), a migration that
        copies from RAG_CHUNK would copy nothing, a rebuild would count no
        chunks. With ``access_vpd`` set every checkout has it (SET_SYSTEM).
        """
        policies, system = conn.execute(self.statement(vpd.SESSION_ACCESS)).one()
        if int(policies or 0) and system != "1":
            raise ConfigurationError(
                f"{doing} refused: this schema has VPD policies on RAG_CHUNK but this session has no access "
                f"context, so it would read no chunk; set [access] vpd = true (access_vpd) and run it again "
                f"(docs/access.md)",
                key="access_vpd",
            )

    def pick(self, conn: sa.Connection, limit: int, max_attempts: int) -> list[QueueRow]:
        self.require_system_access(conn, "the worker")
        # Raw cursor so arraysize/prefetchrows can be pinned to the batch size:
        # SKIP LOCKED locks rows as they are fetched, and a larger prefetch
        # would lock rows this worker will not process in this batch.
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.arraysize = limit
            cursor.prefetchrows = limit
            cursor.execute(self.text(q.PICK), {"max_attempts": max_attempts})
            rows = cursor.fetchmany(limit)
        finally:
            cursor.close()
        return queue_rows(rows)

    def keyword_stats(
        self, conn: sa.Connection, scope: Scope, filters: Filters, where: Where | None
    ) -> Stats | None:
        """The visible set's N and total length from KEYWORD_STATS, which Oracle keeps in its result cache.

        The statement carries the RESULT_CACHE hint: its result is kept per
        text and bind values (so per scope, filters and ``where``) and dropped
        by Oracle when a table it read changes, so a query reads the visible
        records only after a committed write (once per scope), not every time.
        """
        n, total = conn.execute(
            self.statement(q.KEYWORD_STATS, where), search_binds(scope, filters, where)
        ).one()
        return Stats(int(n), int(total or 0))

    def fill_pick(self, conn: sa.Connection, gen: Generation, limit: int) -> list[tuple[int, str]]:
        """The fill's next chunks, locked as fetched (SKIP LOCKED, fetch size pinned like :meth:`pick`)."""
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        try:
            cursor.arraysize = limit
            cursor.prefetchrows = limit
            cursor.execute(self.text(gq.FILL_PICK, gen), {"generation_id": gen.generation_id})
            rows = cursor.fetchmany(limit)
        finally:
            cursor.close()
        return [(int(r[0]), lob_text(r[1])) for r in rows]

    def build_vector_index(self, gen: Generation) -> str:
        """The vector index on ``gen``'s column (IF NOT EXISTS: a killed build is simply run again)."""
        kind = self.settings.vector_index_type
        name = gq.VECTOR_INDEX_NAMES[gen.slot]
        sql = gq.create_vector_index(gen.slot, _ORGANIZATION[kind], int(self.settings.vector_index_accuracy))
        with self.connect() as conn:
            if conn.execute(self.statement(gq.VECTOR_INDEX_EXISTS), {"index_name": name}).scalar_one():
                return f"vector index {name} on {gen.column} already built"
        try:
            with self.begin() as conn:
                conn.execute(self.statement(sql))
        except RagError as exc:
            if "ORA-00955" not in exc.message:  # built by a concurrent activate meanwhile: done
                raise
        # Its centroids come from the filled column: recorded as a rebuild of the slot, so
        # bootstrap's due-rebuild (index_maintenance) counts growth from here.
        with self.begin() as conn:
            conn.execute(
                self.statement(iq.RECORD_MAINTENANCE),
                {"task": iq.rebuild_task(gen.slot), "chunks": self.chunk_total(conn)},
            )
        return f"vector index {name} on {gen.column} ({kind}) built"

    def drop_vector_index(self, gen: Generation) -> None:
        with self.begin() as conn:
            conn.execute(self.statement(gq.drop_vector_index(gen.slot)))

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
        """APPROX top-k, re-run EXACT when it comes back with fewer than ``k`` rows.

        With a selective scope (a developer's own tasks) the optimizer may pick
        an IVF post-filter plan: it probes the nearest partitions, then drops
        the rows the caller may not see, and can return fewer than ``k`` while
        ``k`` are visible. The EXACT form scans every visible row, so "k
        visible => k returned" holds; it costs a second query only when the
        first was short (a small visible set, cheap to scan exactly).
        """
        found = super().semantic_search(conn, query, k, scope, filters, exact, where)
        if exact or len(found) >= k:
            return found
        return super().semantic_search(conn, query, k, scope, filters, True, where)
