"""Every statement behind the engine seam's own operations (chunks, queue, search), per engine.

Statements both engines send with the same text are written once
(``Sql.both``); the others carry each engine's text side by side, so a
reviewer compares them in one place. ``{model}`` is the only thing formatted
into Oracle SQL: the embedding model's name, which Oracle takes as an
identifier (not a bind) in ``VECTOR_EMBEDDING``; it is validated by
configuration and again by :func:`render`. Everything else is a ``:named``
bind. ``tests/test_oracle_golden.py`` pins every Oracle statement.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from oracle_rag.engines.generation_sql import EMBED_VALUE
from oracle_rag.engines.indexed_columns import INDEXED_COLUMNS
from oracle_rag.engines.scope_sql import group_chunk_ids, scope_join, scope_predicate
from oracle_rag.engines.statements import Sql
from oracle_rag.text.bm25 import MAX_QUERY_TERMS

_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_$#]{0,122}$")


def render(template: str, model: str) -> str:
    """An Oracle text as slot 1's generation running ``model`` sends it (golden tests, docs).

    ``{model}`` after validating it (refuse anything that is not an
    identifier), ``{embedding}`` as slot 1's column, and the upsert's vector
    values as slot 1 embedding in SQL and slot 2 empty. The engines render
    through ``generations.render`` from the active generation instead.
    """
    if not _IDENT.match(model):
        raise ValueError("embedding model name must be an unquoted identifier")
    text = template.replace("{vector_1}", EMBED_VALUE["oracle"].replace("{slot}", "1")).replace(
        "{vector_2}", "NULL"
    )
    return text.replace("{model}", model.upper()).replace("{embedding}", "EMBEDDING")


HISTORY_DDL = Sql(
    oracle="""CREATE TABLE IF NOT EXISTS RAG_SCHEMA_HISTORY (
  MIGRATION_SET   VARCHAR2(32 CHAR)  NOT NULL,
  VERSION         NUMBER             NOT NULL,
  DESCRIPTION     VARCHAR2(200 CHAR) NOT NULL,
  CHECKSUM        VARCHAR2(64 CHAR)  NOT NULL,
  STATEMENTS_DONE NUMBER DEFAULT 0   NOT NULL,
  SUCCESS         NUMBER(1) DEFAULT 0 NOT NULL,
  APPLIED_AT      TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
  CONSTRAINT RAG_SCHEMA_HISTORY_PK PRIMARY KEY (MIGRATION_SET, VERSION)
)""",
    sqlite="""CREATE TABLE IF NOT EXISTS RAG_SCHEMA_HISTORY (
  MIGRATION_SET   TEXT    NOT NULL,
  VERSION         INTEGER NOT NULL,
  DESCRIPTION     TEXT    NOT NULL,
  CHECKSUM        TEXT    NOT NULL,
  STATEMENTS_DONE INTEGER NOT NULL DEFAULT 0,
  SUCCESS         INTEGER NOT NULL DEFAULT 0,
  APPLIED_AT      TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now')),
  PRIMARY KEY (MIGRATION_SET, VERSION)
)""",
)

# The access scope: ONE predicate over the chunk row ``c`` for every read on
# both engines, made by the one generator (engines/scope_sql.py) with the
# caller as binds.
SCOPE = scope_predicate()
# The same rule for a statement bounded to a few candidate ids (``c.CHUNK_ID IN
# :ids``: the in-process indexes' re-checks, the texts of a fused top k): the
# group test probes RAG_CHUNK_ACL by its primary key (PRINCIPAL, SOURCE_TYPE,
# SOURCE_ID) for each candidate row instead of reading every chunk id of the
# caller's groups, which SCOPE's IN does once per statement (~3k rows for a
# caller in 20 of 1,000 groups, however few the candidates).
# Over a whole table the IN form wins (a count: one probe per row into the
# joined set; this form would be one correlated subquery per row).
SCOPE_OF_IDS = scope_predicate(group_test="probe")
# The same rule for Oracle's statements over the whole table: the group test
# as outer joins that follow ``RAG_CHUNK c`` (SCOPE_JOIN) and the predicate
# over their columns (SCOPE_JOINED). Oracle runs SCOPE's IN, which sits
# inside the rule's OR, as a FILTER once per row (it does not unnest a
# subquery under a disjunction unless OR-expansion fires); a join is never a
# FILTER (scope_sql.py). SQLite keeps SCOPE: it reads that IN once per statement.
SCOPE_JOIN = scope_join()
SCOPE_JOINED = scope_predicate(group_test="joined")
_SCOPE_JOIN_MARKER, _SCOPE_MARKER = "{scope_join}", "{scope}"


def over_visible_chunks(
    template: str, *, expanding: tuple[str, ...] = (), clobs: tuple[str, ...] = ()
) -> Sql:
    """A statement over ``RAG_CHUNK c`` scoped for each engine: ``{scope_join}`` follows the table,
    ``{scope}`` is the predicate (Oracle: SCOPE_JOIN and SCOPE_JOINED; SQLite: nothing and SCOPE)."""
    if _SCOPE_JOIN_MARKER not in template or _SCOPE_MARKER not in template:
        raise ValueError("a statement over the visible chunks names {scope_join} and {scope}")
    return Sql(
        oracle=template.replace(_SCOPE_JOIN_MARKER, SCOPE_JOIN).replace(_SCOPE_MARKER, SCOPE_JOINED),
        sqlite=template.replace(" " + _SCOPE_JOIN_MARKER, "").replace(_SCOPE_MARKER, SCOPE),
        expanding=expanding,
        clobs=clobs,
    )


# A search's Filters (records.Filters): each indexed facet column compared with its bind, then the types.
FILTERS = (
    " AND ".join(f"(:{c.filter_bind} IS NULL OR c.{c.column} = :{c.filter_bind})" for c in INDEXED_COLUMNS)
    + " AND (:f_all_types = 1 OR c.SOURCE_TYPE IN :f_types) "
    "AND (:f_first_chunk = 0 OR c.CHUNK_NO = 0) "
    "AND /* where */ 1 = 1"
)

EMBED = Sql(
    oracle="SELECT VECTOR_EMBEDDING({model} USING :text AS data) AS QUERY_VECTOR FROM dual",
    sqlite="SELECT vector_embedding({model}, :text) AS QUERY_VECTOR",
)

MODEL_STATUS = Sql(
    oracle="""SELECT MODEL_NAME, MINING_FUNCTION, ALGORITHM, CREATION_DATE
FROM USER_MINING_MODELS
WHERE MODEL_NAME = :model_name"""
)

MODEL_EXISTS = Sql(oracle="SELECT COUNT(*) FROM USER_MINING_MODELS WHERE MODEL_NAME = :model_name")

# -- schema changes while workers write (migrate, bootstrap) --------------------------
# DDL on a table another session holds uncommitted DML on fails at once with
# ORA-00054 (DDL_LOCK_TIMEOUT defaults to 0, "a status of NOWAIT"); the
# migrating session waits up to DDL_LOCK_WAIT_S for the workers' open
# transactions instead (Database Reference, DDL_LOCK_TIMEOUT: ALTER SESSION,
# 0 to 1,000,000 seconds). Session-level: it changes nothing for DML.
DDL_LOCK_WAIT_S = 120
ALTER_SESSION_DDL_LOCK_TIMEOUT = Sql(oracle=f"ALTER SESSION SET DDL_LOCK_TIMEOUT = {DDL_LOCK_WAIT_S}")
# Does a session hold uncommitted writes on the worker's tables right now (a
# worker mid-batch)? A SHARE lock cannot be granted next to another session's
# row locks, so NOWAIT answers ORA-00054 exactly then; the caller rolls back
# at once, releasing it. RAG_DIRTY is not probed: the host application's
# triggers write it in their own transactions all the time.
LOCK_CHUNK_TABLES_NOWAIT = Sql(oracle="LOCK TABLE RAG_CHUNK, RAG_CHUNK_TERM IN SHARE MODE NOWAIT")

# The hash plus the scope columns: a chunk whose text is unchanged but whose
# owner/project/sprint changed (a task reassigned to a namesake) must still
# be rewritten, or the access scope would follow the old owner.
# Per record: chunk 0 carries the record's hash, scope and facets (every
# chunk of a record has the same ones).
READ_CHUNK_STATE = Sql.both(
    "SELECT SOURCE_ID, CONTENT_HASH, OWNER_ID, PROJECT_ID, SPRINT_ID, FACETS, TERM_COUNT, "
    "ACCESS_OWNER, ACCESS_PUBLIC, ACCESS_GROUPS FROM RAG_CHUNK "
    "WHERE SOURCE_TYPE = :source_type AND SOURCE_ID IN :ids AND CHUNK_NO = 0",
    expanding=("ids",),
)

# The text is embedded inside the database (Oracle: the loaded ONNX model;
# SQLite: vector_embedding(), the same graph in-process) for every live model
# generation (engines/generations.py): {vector_1} / {vector_2} are each slot's
# value (generation_sql: embedded here, bound, or none), :generation_<slot> its
# stamp. :embed_text_<slot> is the content with that model's passage prefix,
# cut to 4000 bytes (VARCHAR2); :content is a CLOB on Oracle.
_SQLITE_UPSERT_CHUNK = """INSERT INTO RAG_CHUNK
  (SOURCE_TYPE, SOURCE_ID, CHUNK_NO, OWNER_ID, PROJECT_ID, SPRINT_ID, FACETS, CONTENT, EMBEDDING,
   EMBEDDING_GEN, EMBEDDING_2, EMBEDDING_2_GEN, CONTENT_HASH, TERM_COUNT, ACCESS_OWNER, ACCESS_PUBLIC,
   ACCESS_GROUPS, UPDATED_AT)
VALUES
  (:source_type, :source_id, :chunk_no, :owner_id, :project_id, :sprint_id, :facets, :content,
   {vector_1}, :generation_1, {vector_2}, :generation_2, :content_hash, :term_count,
   :access_owner, :access_public, :access_groups_json, strftime('%Y-%m-%dT%H:%M:%f', 'now'))
ON CONFLICT (SOURCE_TYPE, SOURCE_ID, CHUNK_NO) DO UPDATE SET
  OWNER_ID = excluded.OWNER_ID,
  PROJECT_ID = excluded.PROJECT_ID,
  SPRINT_ID = excluded.SPRINT_ID,
  FACETS = excluded.FACETS,
  CONTENT = excluded.CONTENT,
  EMBEDDING = excluded.EMBEDDING,
  EMBEDDING_GEN = excluded.EMBEDDING_GEN,
  EMBEDDING_2 = excluded.EMBEDDING_2,
  EMBEDDING_2_GEN = excluded.EMBEDDING_2_GEN,
  CONTENT_HASH = excluded.CONTENT_HASH,
  TERM_COUNT = excluded.TERM_COUNT,
  ACCESS_OWNER = excluded.ACCESS_OWNER,
  ACCESS_PUBLIC = excluded.ACCESS_PUBLIC,
  ACCESS_GROUPS = excluded.ACCESS_GROUPS,
  UPDATED_AT = excluded.UPDATED_AT"""
UPSERT_CHUNK = Sql(
    oracle="""MERGE INTO RAG_CHUNK t
USING (SELECT :source_type AS SOURCE_TYPE, :source_id AS SOURCE_ID, :chunk_no AS CHUNK_NO FROM dual) s
ON (t.SOURCE_TYPE = s.SOURCE_TYPE AND t.SOURCE_ID = s.SOURCE_ID AND t.CHUNK_NO = s.CHUNK_NO)
WHEN MATCHED THEN UPDATE SET
  t.OWNER_ID = :owner_id,
  t.PROJECT_ID = :project_id,
  t.SPRINT_ID = :sprint_id,
  t.FACETS = JSON(:facets),
  t.CONTENT = :content,
  t.EMBEDDING = {vector_1},
  t.EMBEDDING_GEN = :generation_1,
  t.EMBEDDING_2 = {vector_2},
  t.EMBEDDING_2_GEN = :generation_2,
  t.CONTENT_HASH = :content_hash,
  t.TERM_COUNT = :term_count,
  t.ACCESS_OWNER = :access_owner,
  t.ACCESS_PUBLIC = :access_public,
  t.ACCESS_GROUPS = :access_groups_json,
  t.UPDATED_AT = SYSTIMESTAMP
WHEN NOT MATCHED THEN INSERT
  (SOURCE_TYPE, SOURCE_ID, CHUNK_NO, OWNER_ID, PROJECT_ID, SPRINT_ID, FACETS, CONTENT, EMBEDDING,
   EMBEDDING_GEN, EMBEDDING_2, EMBEDDING_2_GEN, CONTENT_HASH, TERM_COUNT, ACCESS_OWNER, ACCESS_PUBLIC,
   ACCESS_GROUPS, UPDATED_AT)
VALUES
  (s.SOURCE_TYPE, s.SOURCE_ID, s.CHUNK_NO, :owner_id, :project_id, :sprint_id, JSON(:facets), :content,
   {vector_1}, :generation_1, {vector_2}, :generation_2, :content_hash, :term_count,
   :access_owner, :access_public, :access_groups_json, SYSTIMESTAMP)""",
    sqlite=_SQLITE_UPSERT_CHUNK,
    clobs=("content", "access_groups_json"),
)

# The upsert during a model switch, as Oracle receives it: both slots embedded
# in the statement, each by its own generation's model (pinned by the goldens).
_EMBED_IN_ORACLE = EMBED_VALUE["oracle"]
UPSERT_FORMS = {
    "UPSERT_CHUNK_TWO_GENERATIONS": Sql(
        oracle=(UPSERT_CHUNK.oracle or "")
        .replace("{vector_1}", _EMBED_IN_ORACLE.replace("{slot}", "1"))
        .replace(
            "{vector_2}", _EMBED_IN_ORACLE.replace("{slot}", "2").replace("{model}", "MULTILINGUAL_E5_SMALL")
        ),
        clobs=UPSERT_CHUNK.clobs,
    )
}

# Re-scoping without re-embedding: the record's text is unchanged, its owner,
# project, sprint, facets or access are not. Every chunk of the record, no embedding.
UPDATE_SCOPE = Sql(
    oracle="""UPDATE RAG_CHUNK
SET OWNER_ID = :owner_id, PROJECT_ID = :project_id, SPRINT_ID = :sprint_id, FACETS = JSON(:facets),
    ACCESS_OWNER = :access_owner, ACCESS_PUBLIC = :access_public, ACCESS_GROUPS = :access_groups_json,
    UPDATED_AT = SYSTIMESTAMP
WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id""",
    sqlite="""UPDATE RAG_CHUNK
SET OWNER_ID = :owner_id, PROJECT_ID = :project_id, SPRINT_ID = :sprint_id, FACETS = :facets,
    ACCESS_OWNER = :access_owner, ACCESS_PUBLIC = :access_public, ACCESS_GROUPS = :access_groups_json,
    UPDATED_AT = strftime('%Y-%m-%dT%H:%M:%f', 'now')
WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id""",
    clobs=("access_groups_json",),
)

# Only the access of a record (a SQL source's ACL changed; its row did not).
UPDATE_ACCESS = Sql(
    oracle="""UPDATE RAG_CHUNK
SET ACCESS_OWNER = :access_owner, ACCESS_PUBLIC = :access_public, ACCESS_GROUPS = :access_groups_json,
    UPDATED_AT = SYSTIMESTAMP
WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id""",
    sqlite="""UPDATE RAG_CHUNK
SET ACCESS_OWNER = :access_owner, ACCESS_PUBLIC = :access_public, ACCESS_GROUPS = :access_groups_json,
    UPDATED_AT = strftime('%Y-%m-%dT%H:%M:%f', 'now')
WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id""",
    clobs=("access_groups_json",),
)

# A record's groups (RAG_CHUNK_ACL), replaced with its access columns.
DELETE_ACL = Sql.both("DELETE FROM RAG_CHUNK_ACL WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id")
INSERT_ACL = Sql.both(
    "INSERT INTO RAG_CHUNK_ACL (PRINCIPAL, SOURCE_TYPE, SOURCE_ID) "
    "VALUES (:principal, :source_type, :source_id)"
)

# The access state of every record of a source (chunk 0): what an ACL refresh compares.
SOURCE_ACCESS = Sql.both(
    "SELECT SOURCE_ID, OWNER_ID, ACCESS_OWNER, ACCESS_PUBLIC, ACCESS_GROUPS FROM RAG_CHUNK "
    "WHERE SOURCE_TYPE = :source_type AND CHUNK_NO = 0"
)

# Sources whose permission data could not be read: hidden from callers without see-all.
ACCESS_FAILURES = Sql.both(
    "SELECT SOURCE_TYPE, FAILED_AT, ERROR_CODE FROM RAG_ACCESS_FAILURE ORDER BY SOURCE_TYPE"
)
RECORD_ACCESS_FAILURE = Sql(
    oracle="""MERGE INTO RAG_ACCESS_FAILURE t
USING (SELECT :source_type AS SOURCE_TYPE FROM dual) s
ON (t.SOURCE_TYPE = s.SOURCE_TYPE)
WHEN MATCHED THEN UPDATE SET t.FAILED_AT = :failed_at, t.ERROR_CODE = :error_code
WHEN NOT MATCHED THEN INSERT (SOURCE_TYPE, FAILED_AT, ERROR_CODE) VALUES (s.SOURCE_TYPE, :failed_at, :error_code)""",
    sqlite="""INSERT INTO RAG_ACCESS_FAILURE (SOURCE_TYPE, FAILED_AT, ERROR_CODE) VALUES (:source_type, :failed_at, :error_code)
ON CONFLICT (SOURCE_TYPE) DO UPDATE SET FAILED_AT = excluded.FAILED_AT, ERROR_CODE = excluded.ERROR_CODE""",
)
CLEAR_ACCESS_FAILURE = Sql.both("DELETE FROM RAG_ACCESS_FAILURE WHERE SOURCE_TYPE = :source_type")

# A record's BM25 analysis lives on its chunk 0 (text/bm25.py): its length ...
UPDATE_TERM_COUNT = Sql.both(
    "UPDATE RAG_CHUNK SET TERM_COUNT = :term_count "
    "WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id AND CHUNK_NO = 0"
)

# ... and its postings, replaced whenever the record is written or analysed
# (and deleted when its chunk 0 is written without an analysis: a record has
# postings exactly when its TERM_COUNT is set). Each posting carries what the
# keyword statement reads of its record (POSTING_COLUMNS: the length, the
# scope and filter columns), copied from chunk 0 as it is when the postings
# are written, so scoring reads the query terms' postings and nothing else.
DELETE_TERMS = Sql.both(
    "DELETE FROM RAG_CHUNK_TERM WHERE CHUNK_ID IN (SELECT CHUNK_ID FROM RAG_CHUNK "
    "WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id AND CHUNK_NO = 0)"
)
# The record's columns each posting carries, under their RAG_CHUNK names.
POSTING_COLUMNS = (
    "CHUNK_ID",
    "TERM_COUNT",
    "SOURCE_TYPE",
    "ACCESS_PUBLIC",
    "ACCESS_OWNER",
    *(c.column for c in INDEXED_COLUMNS),
)
_CARRIED = ", ".join(POSTING_COLUMNS)
INSERT_TERM = Sql.both(
    f"INSERT INTO RAG_CHUNK_TERM (TERM, TF, {_CARRIED}) SELECT :term, :tf, {_CARRIED} FROM RAG_CHUNK "
    "WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id AND CHUNK_NO = 0 AND TERM_COUNT IS NOT NULL"
)
# After a record's scope or access changed without a new analysis (UPDATE_SCOPE,
# UPDATE_ACCESS): its postings take the new values from its chunk 0. No alias
# on the updated table (Oracle's UPDATE takes no AS, SQLite's no bare alias).
_SYNCED = (*(c.column for c in INDEXED_COLUMNS), "ACCESS_OWNER", "ACCESS_PUBLIC")
UPDATE_TERM_SCOPE = Sql.both(
    "UPDATE RAG_CHUNK_TERM SET "
    + ", ".join(
        f"{col} = (SELECT c.{col} FROM RAG_CHUNK c WHERE c.CHUNK_ID = RAG_CHUNK_TERM.CHUNK_ID)"
        for col in _SYNCED
    )
    + " WHERE CHUNK_ID IN (SELECT CHUNK_ID FROM RAG_CHUNK "
    "WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id AND CHUNK_NO = 0)"
)

# Records not analysed with the current analyser (TERM_COUNT NULL on chunk 0:
# rows from before BM25, or reset by the migration that changed the analyser),
# a batch at a time by CHUNK_ID; then every chunk of them, to re-analyse from
# CONTENT without embedding (Engine.analyse_pending).
UNANALYSED_RECORDS = Sql(
    oracle="""SELECT CHUNK_ID FROM RAG_CHUNK
WHERE CHUNK_NO = 0 AND TERM_COUNT IS NULL AND CHUNK_ID > :after
ORDER BY CHUNK_ID
FETCH FIRST :limit ROWS ONLY""",
    sqlite="""SELECT CHUNK_ID FROM RAG_CHUNK
WHERE CHUNK_NO = 0 AND TERM_COUNT IS NULL AND CHUNK_ID > :after
ORDER BY CHUNK_ID
LIMIT :limit""",
)
ANALYSIS_TEXTS = Sql.both(
    """SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, p.CONTENT
FROM RAG_CHUNK c
JOIN RAG_CHUNK p ON p.SOURCE_TYPE = c.SOURCE_TYPE AND p.SOURCE_ID = c.SOURCE_ID
WHERE c.CHUNK_ID IN :ids
ORDER BY c.CHUNK_ID, p.CHUNK_NO""",
    expanding=("ids",),
)

CHUNK_IDS = Sql.both("SELECT DISTINCT SOURCE_ID FROM RAG_CHUNK WHERE SOURCE_TYPE = :source_type")

QUEUED_IDS = Sql.both(
    "SELECT DISTINCT SOURCE_ID FROM RAG_DIRTY WHERE SOURCE_TYPE = :source_type AND ACTION = 'UPSERT'"
)

# A record's chunks go together (hash-skip and delete work per record).
DELETE_CHUNK = Sql.both("DELETE FROM RAG_CHUNK WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id")

# After a record is rewritten with :chunk_count chunks: drop the chunks it no longer has.
DELETE_EXTRA_CHUNKS = Sql.both(
    "DELETE FROM RAG_CHUNK WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id "
    "AND CHUNK_NO >= :chunk_count"
)

ENQUEUE = Sql.both(
    "INSERT INTO RAG_DIRTY (SOURCE_TYPE, SOURCE_ID, ACTION) VALUES (:source_type, :source_id, :action)"
)

# Oracle: no FETCH FIRST here: FETCH FIRST + FOR UPDATE raises ORA-02014, and
# a ROWNUM or ROWID-subquery limit is applied before locking, so it returns
# short batches while unlocked rows wait. Instead the cursor is opened with
# no limit and the worker fetches exactly `batch_size` rows with
# arraysize = prefetchrows = batch_size: SKIP LOCKED locks rows as they are
# fetched, so only the rows we take are locked.
# SQLite: runs inside BEGIN IMMEDIATE: the write lock is held from the pick
# to the commit, so two processes never work on the same rows, and a crash
# rolls the whole batch back with the queue rows intact.
PICK = Sql(
    oracle="""SELECT DIRTY_ID, SOURCE_TYPE, SOURCE_ID, ACTION, ATTEMPTS, ENQUEUED_AT, LAST_ERROR
FROM RAG_DIRTY
WHERE ATTEMPTS < :max_attempts
ORDER BY ENQUEUED_AT, DIRTY_ID
FOR UPDATE SKIP LOCKED""",
    sqlite="""SELECT DIRTY_ID, SOURCE_TYPE, SOURCE_ID, ACTION, ATTEMPTS, ENQUEUED_AT, LAST_ERROR
FROM RAG_DIRTY
WHERE ATTEMPTS < :max_attempts
ORDER BY ENQUEUED_AT, DIRTY_ID
LIMIT :limit""",
)

# Which picked rows are still queued: the embedded engine's worker re-checks
# them in its write transaction (a row gone meanwhile was handled by someone
# else: its entity is left for a later batch). :ids is a JSON array.
QUEUE_ROWS_PRESENT = Sql(
    sqlite="SELECT DIRTY_ID FROM RAG_DIRTY WHERE DIRTY_ID IN (SELECT value FROM json_each(:ids))"
)

DELETE_QUEUE_ROW = Sql.both("DELETE FROM RAG_DIRTY WHERE DIRTY_ID = :dirty_id")

FAIL_QUEUE_ROW = Sql.both(
    "UPDATE RAG_DIRTY SET ATTEMPTS = ATTEMPTS + 1, LAST_ERROR = :error WHERE DIRTY_ID = :dirty_id"
)

RETRY_FAILED = Sql.both("UPDATE RAG_DIRTY SET ATTEMPTS = 0 WHERE ATTEMPTS >= :max_attempts")

LIST_QUEUE = Sql(
    oracle="""SELECT DIRTY_ID, SOURCE_TYPE, SOURCE_ID, ACTION, ATTEMPTS, ENQUEUED_AT, LAST_ERROR
FROM RAG_DIRTY
WHERE (:failed_only = 0 OR ATTEMPTS >= :max_attempts)
ORDER BY ENQUEUED_AT, DIRTY_ID
FETCH FIRST :limit ROWS ONLY""",
    sqlite="""SELECT DIRTY_ID, SOURCE_TYPE, SOURCE_ID, ACTION, ATTEMPTS, ENQUEUED_AT, LAST_ERROR
FROM RAG_DIRTY
WHERE (:failed_only = 0 OR ATTEMPTS >= :max_attempts)
ORDER BY ENQUEUED_AT, DIRTY_ID
LIMIT :limit""",
)

QUEUE_STATS = Sql(
    # Oracle: the oldest row's age from the interval SYSTIMESTAMP - ENQUEUED_AT.
    # Both are TIMESTAMP WITH TIME ZONE, and Oracle does datetime arithmetic on
    # them in UTC (SQL Language Reference, "Datetime and Interval Arithmetic"),
    # so the age is right across a DST change; CAST(... AS DATE) would drop the
    # offsets and be an hour off when the row was enqueued under the other one.
    oracle="""SELECT DEPTH, OLDEST, STALLED, FAILED,
  EXTRACT(DAY FROM AGE) * 86400 + EXTRACT(HOUR FROM AGE) * 3600
    + EXTRACT(MINUTE FROM AGE) * 60 + EXTRACT(SECOND FROM AGE) AS OLDEST_AGE_S
FROM (
  SELECT COUNT(*) AS DEPTH,
    MIN(ENQUEUED_AT) AS OLDEST,
    SUM(CASE WHEN ATTEMPTS >= 3 THEN 1 ELSE 0 END) AS STALLED,
    SUM(CASE WHEN ATTEMPTS >= :max_attempts THEN 1 ELSE 0 END) AS FAILED,
    SYSTIMESTAMP - MIN(ENQUEUED_AT) AS AGE
  FROM RAG_DIRTY
)""",
    sqlite="""SELECT COUNT(*) AS DEPTH,
  MIN(ENQUEUED_AT) AS OLDEST,
  SUM(CASE WHEN ATTEMPTS >= 3 THEN 1 ELSE 0 END) AS STALLED,
  SUM(CASE WHEN ATTEMPTS >= :max_attempts THEN 1 ELSE 0 END) AS FAILED,
  (julianday('now') - julianday(MIN(ENQUEUED_AT))) * 86400.0 AS OLDEST_AGE_S
FROM RAG_DIRTY""",
)

CHUNKS_BY_TYPE = Sql.both(
    "SELECT SOURCE_TYPE, COUNT(*) AS N FROM RAG_CHUNK GROUP BY SOURCE_TYPE ORDER BY SOURCE_TYPE"
)

# The scope predicate sits inside the statement, before the top-k, so a
# scoped query still returns k rows when k are visible.
# Oracle: with the IVF index the optimizer chooses a pre-filter or
# post-filter plan (see the plan test); a post-filter plan can still come
# back short, so the engine re-runs the EXACT form when the APPROX one
# returns fewer than k (OracleEngine.semantic_search). The query is embedded
# once: ORDER BY names the select-list alias (as langchain-oracledb's
# OracleVS does: "vector_distance(...) as distance ... ORDER BY distance
# FETCH APPROX FIRST k ROWS ONLY"), so VECTOR_EMBEDDING appears a single
# time and the distance stays the only sort key an approximate top-k accepts.
# The approximate form keeps SCOPE's per-row group test: a post-filter plan
# tests only the candidates the index returns, and a join next to the vector
# index's row source is not a shape the vector search documentation shows
# (the plan test asserts the index). The EXACT form reads every chunk, so it
# takes the joined test (SCOPE_JOIN / SCOPE_JOINED: no FILTER over the ACL).
# SQLite: exact cosine scan; the query is embedded once in the CTE.
_ORACLE_SEMANTIC_TEMPLATE = f"""SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT,
       VECTOR_DISTANCE(c.{{embedding}}, VECTOR_EMBEDDING({{model}} USING :query AS data), COSINE) AS DISTANCE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM RAG_CHUNK c{{scope_join}}
WHERE {{scope}}
  AND {FILTERS}
ORDER BY DISTANCE
FETCH {{fetch}} FIRST :k ROWS ONLY"""
_ORACLE_SEMANTIC_SEARCH = _ORACLE_SEMANTIC_TEMPLATE.format(
    model="{model}", embedding="{embedding}", scope_join="", scope=SCOPE, fetch="APPROX"
)
_SQLITE_SEMANTIC_SEARCH = f"""WITH q AS (SELECT vector_embedding({{model}}, :query) AS v)
SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT,
       vec_distance_cosine(c.{{embedding}}, (SELECT v FROM q)) AS SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM RAG_CHUNK c
WHERE {SCOPE}
  AND {FILTERS}
ORDER BY SCORE, c.CHUNK_ID
LIMIT :k"""
SEMANTIC_SEARCH = Sql(oracle=_ORACLE_SEMANTIC_SEARCH, sqlite=_SQLITE_SEMANTIC_SEARCH, expanding=("f_types",))

# EXACT: guaranteed full scan: the recall reference, and the fallback of a
# short APPROX result. No approximate index on the embedded engine: exact is
# its only mode.
SEMANTIC_SEARCH_EXACT = Sql(
    oracle=_ORACLE_SEMANTIC_TEMPLATE.format(
        model="{model}",
        embedding="{embedding}",
        scope_join=" " + SCOPE_JOIN,
        scope=SCOPE_JOINED,
        fetch="EXACT",
    ),
    sqlite=_SQLITE_SEMANTIC_SEARCH,
    expanding=("f_types",),
)

# -- keyword search: BM25 over records (text/bm25.py), computed in the database ----------------------
# N and the total length of the visible records (chunk 0 of each analysed
# record), read before the keyword statement and bound into it, so that
# statement reads only the query terms' postings. The embedded engine caches
# them per scope while its change log has not moved (SqliteEngine.keyword_stats).
# Oracle keeps them in its server result cache (RESULT_CACHE hint): the result
# is kept per statement text and bind values, so per scope, and "automatically
# invalidated whenever a database object used in its creation is successfully
# changed" (RAG_CHUNK, RAG_CHUNK_ACL under RAG_CHUNK_GROUP, RAG_ACCESS_FAILURE):
# after a committed write the next query per scope reads the visible records'
# chunk 0 once (RAG_CHUNK_RECORD_IX), later ones read the cache. Where the
# result cache is off (RESULT_CACHE_MAX_SIZE = 0) the hint does nothing and
# every query reads them.
_KEYWORD_VISIBLE = f"""SELECT {{hint}}COUNT(*) AS N, COALESCE(SUM(c.TERM_COUNT), 0) AS TOTAL_LENGTH
  FROM RAG_CHUNK c{{scope_join}}
  WHERE c.CHUNK_NO = 0
    AND c.TERM_COUNT IS NOT NULL
    AND {{scope}}
    AND {FILTERS}"""
KEYWORD_STATS = Sql(
    oracle=_KEYWORD_VISIBLE.format(
        hint="/*+ RESULT_CACHE */ ", scope_join=" " + SCOPE_JOIN, scope=SCOPE_JOINED
    ).replace("\n  ", "\n"),
    sqlite=_KEYWORD_VISIBLE.format(hint="", scope_join="", scope=SCOPE).replace("\n  ", "\n"),
    expanding=("f_types",),
)

# BM25 of the visible records in one statement (text/bm25.py's formula, term by
# term in the same floating-point operations): the query's terms and their
# counts (:t0.., :f0..), the visible set's N and average length, each term's
# document frequency and weight over the visible postings, the candidates'
# scores summed per record, and only the best :k rows leave the database,
# followed by one row per query term found (TERM, DF, N: the passage weights).
# The postings are read by term (RAG_CHUNK_TERM's key leads with TERM; on
# Oracle RAG_CHUNK_TERM_SCORE_IX holds every column read), one range per term
# for the document frequencies. The scores skip what cannot reach the top k
# (max-score pruning): a posting adds at most its term's weight
# W (its tf part is below 1 when k1 >= 0 and 0 <= b <= 1), so a record that
# holds only terms whose weights sum below the k-th best score is out. The
# k-th best score is bounded from below by scoring in full up to
# KEYWORD_SEED_ROWS visible records of the rarest term (``seed``: any visible
# records give a lower bound; each term's posting of a record is one key
# probe, (TERM, CHUNK_ID)), less 1e-6 so that no rounding at 9 decimals or
# summation order can bring a pruned record level with it. Ranking the terms
# by W, the longest run of the commonest whose weights sum below that bound
# is ``ESSENTIAL = 0``: their postings are read only for the records found
# through the others (again key probes), so a common term's thousands of
# postings are never grouped; a record found whose partial score plus all
# those terms' weights (``rest``) stays below the bound is dropped before its
# probes. With fewer than :k seed records nothing is pruned. The work grows
# with the query terms' postings (the document frequencies) and with the
# rarer terms' postings (the scores), never with the table: N and the total
# length come bound (KEYWORD_STATS, read first). Oracle joins the group test
# (SCOPE_JOIN, the caller's group chunks a query name read for the three
# steps that scope postings) rather than run SCOPE's IN as a FILTER per
# posting; SQLite keeps SCOPE. Each posting carries its record's length, scope and filter
# columns under their RAG_CHUNK names, so without a ``where`` fragment the
# postings are the row ``c`` that SCOPE and the filters read and RAG_CHUNK is
# not joined; a ``where`` fragment may read any chunk column (FACETS), so
# that form joins each posting to its chunk. A record's probes need no scope:
# every posting of a record carries the same scope columns. The order is
# ROUND(SCORE, 9) then CHUNK_ID (bm25.RANK_DECIMALS): Oracle sums NUMBERs,
# SQLite doubles in its own order, numpy in term order; rounded, every form
# ranks the same records the same way. SQLite is told to compute each step
# once (MATERIALIZED) rather than fold it into the next one's loop.
# Generated for n terms by keyword_top (its names come from keyword_binds).
KEYWORD_SEED_ROWS = 1000
_KEYWORD_TOP = """WITH {group_chunks}q AS (
  {terms}
), visible_set AS (
  {visible}
), df AS (
  SELECT {p}.TERM, COUNT(*) AS DF
  FROM {postings}{scope_join}
  WHERE {p}.TERM IN ({term_list})
    AND {scope}
    AND {filters}
  GROUP BY {p}.TERM
), weight AS {materialized}(
  SELECT d.TERM, d.DF, v.N, q.QTF * LN(1.0 + (v.N - d.DF + 0.5) / (d.DF + 0.5)) AS W,
         CASE WHEN v.TOTAL_LENGTH > 0 THEN 1.0 * v.TOTAL_LENGTH / v.N ELSE 1.0 END AS AVGDL
  FROM df d
  JOIN q ON q.TERM = d.TERM
  CROSS JOIN visible_set v
), seed AS {materialized}(
  SELECT {p}.CHUNK_ID
  FROM {postings}{scope_join}
  WHERE {p}.TERM = (SELECT w.TERM FROM weight w ORDER BY w.W DESC, w.TERM {first_row})
    AND {scope}
    AND {filters}
  {seed_rows}
), seed_scored AS (
  SELECT (SELECT SUM({impact_x})
          FROM weight w
          CROSS JOIN RAG_CHUNK_TERM x
          WHERE x.TERM = w.TERM AND x.CHUNK_ID = s.CHUNK_ID) AS SCORE
  FROM seed s
), threshold AS (
  SELECT CASE WHEN COUNT(*) >= :k AND :k1 >= 0 AND :b >= 0 AND :b <= 1
              THEN MIN(t.SCORE) - 0.000001 ELSE 0 END AS THETA
  FROM (SELECT ss.SCORE FROM seed_scored ss ORDER BY ss.SCORE DESC {k_rows}) t
), term_bound AS {materialized}(
  SELECT w.TERM, w.W, w.AVGDL, h.THETA,
         CASE WHEN SUM(w.W) OVER (ORDER BY w.W, w.TERM ROWS UNBOUNDED PRECEDING) < h.THETA
              THEN 0 ELSE 1 END AS ESSENTIAL
  FROM weight w
  CROSS JOIN threshold h
), rest AS (
  SELECT MAX(b.THETA) AS THETA, COALESCE(SUM(CASE WHEN b.ESSENTIAL = 0 THEN b.W END), 0) AS REST
  FROM term_bound b
), found AS {materialized}(
  SELECT {p}.CHUNK_ID, SUM({impact_p}) AS SCORE
  FROM term_bound w
  JOIN {postings_on}{scope_join}
  WHERE w.ESSENTIAL = 1
    AND {scope}
    AND {filters}
  GROUP BY {p}.CHUNK_ID
), scored AS {materialized}(
  SELECT f.CHUNK_ID,
         f.SCORE + COALESCE((SELECT SUM({impact_x})
                             FROM term_bound w
                             CROSS JOIN RAG_CHUNK_TERM x
                             WHERE w.ESSENTIAL = 0 AND x.TERM = w.TERM AND x.CHUNK_ID = f.CHUNK_ID), 0) AS SCORE
  FROM found f
  CROSS JOIN rest r
  WHERE f.SCORE + r.REST >= r.THETA
){best}
SELECT b.CHUNK_ID, b.SCORE, NULL AS TERM, NULL AS DF, NULL AS N FROM best b
UNION ALL
SELECT NULL, NULL, w.TERM, w.DF, w.N FROM weight w"""

# The filters over a posting: every posting is of an analysed chunk 0 (so the
# first-chunk test holds) and no where fragment applies (that form joins RAG_CHUNK).
_FIRST_CHUNK, _WHERE = (
    "AND (:f_first_chunk = 0 OR c.CHUNK_NO = 0) ",
    " AND /* where */ 1 = 1",
)  # records.WHERE_MARKER
if _FIRST_CHUNK not in FILTERS or not FILTERS.endswith(_WHERE):
    raise RuntimeError("FILTERS changed shape: update POSTING_FILTERS (engine_sql.py)")
POSTING_FILTERS = FILTERS.replace(_FIRST_CHUNK, "").removesuffix(_WHERE)
_READ = set(
    re.findall(r"\bc\.([A-Z_]+)", SCOPE + " " + SCOPE_JOINED + " " + SCOPE_JOIN + " " + POSTING_FILTERS)
)
if not _READ <= set(POSTING_COLUMNS):
    raise RuntimeError(
        f"the scope or filters read {sorted(_READ - set(POSTING_COLUMNS))}, which the postings "
        "do not carry: add them to POSTING_COLUMNS and a migration"
    )

# A posting's part of its record's score (text/bm25.py): at most W, as k1 >= 0 and 0 <= b <= 1.
_IMPACT = "w.W * {p}.TF / ({p}.TF + :k1 * (1.0 - :b + :b * {p}.TERM_COUNT / w.AVGDL))"
# The row limits inside the statement: the seed term, the seed's postings, the k-th seed score.
_ROWS = {
    "first_row": {"oracle": "FETCH FIRST 1 ROWS ONLY", "sqlite": "LIMIT 1"},
    "seed_rows": {
        "oracle": f"FETCH FIRST {KEYWORD_SEED_ROWS} ROWS ONLY",
        "sqlite": f"LIMIT {KEYWORD_SEED_ROWS}",
    },
    "k_rows": {"oracle": "FETCH FIRST :k ROWS ONLY", "sqlite": "LIMIT :k"},
}
_TERM_ROW = {
    "oracle": "SELECT :t{i} AS TERM, :f{i} AS QTF FROM dual",
    "sqlite": "SELECT :t{i} AS TERM, :f{i} AS QTF",
}
_MATERIALIZED = {"oracle": "", "sqlite": "MATERIALIZED "}
# The best k by ROUND(SCORE, 9) then CHUNK_ID. SQLite's round() goes through
# text (printf and back): over every scored record it cost as much as the
# scoring (measured at 100k, about half of the statement), so SQLite rounds
# only the records within 1e-9 of the k-th best raw score: rounding is
# monotone and moves a score by at most 0.5e-9, so every record of the
# rounded top k is among them, and the order among them is the same.
_BEST = {
    "oracle": """, best AS (
  SELECT s.CHUNK_ID, s.SCORE
  FROM scored s
  ORDER BY ROUND(s.SCORE, 9) DESC, s.CHUNK_ID
  FETCH FIRST :k ROWS ONLY
)""",
    "sqlite": """, top_raw AS (
  SELECT s.SCORE FROM scored s ORDER BY s.SCORE DESC LIMIT :k
), best AS (
  SELECT s.CHUNK_ID, s.SCORE
  FROM scored s
  WHERE s.SCORE >= (SELECT MIN(r.SCORE) FROM top_raw r) - 0.000000001
  ORDER BY ROUND(s.SCORE, 9) DESC, s.CHUNK_ID
  LIMIT :k
)""",
}
# The visible set's statistics bound (from the embedded engine's per-scope cache) instead of scanned.
_VISIBLE_BOUND = {
    "oracle": "SELECT :n AS N, :total_length AS TOTAL_LENGTH FROM dual",
    "sqlite": "SELECT :n AS N, :total_length AS TOTAL_LENGTH",
}


# Oracle: the caller's group chunks once per statement as a query name (the
# optimizer may keep a query name referenced more than once as a temporary
# table), outer-joined by the steps that scope postings.
_GROUP_CHUNKS = {"oracle": f"caller_chunks AS (\n  {group_chunk_ids()}\n), ", "sqlite": ""}
_POSTING_SCOPE = {
    "oracle": ("\n  " + scope_join(group_chunks="caller_chunks"), SCOPE_JOINED),
    "sqlite": ("", SCOPE),
}


def _keyword_top_text(
    side: str, terms: int, stats_bound: bool, joined: bool, scope_side: str | None = None
) -> str:
    """``side``'s text; ``scope_side`` takes the scope's form from the other engine (a test runs Oracle's
    joined group test on SQLite, where the rest of Oracle's text does not run)."""
    rows = "\n  UNION ALL ".join(_TERM_ROW[side].format(i=i) for i in range(terms))
    join, scope = _POSTING_SCOPE[scope_side or side]
    visible = (
        _VISIBLE_BOUND[side] if stats_bound else _KEYWORD_VISIBLE.format(hint="", scope_join="", scope=SCOPE)
    )
    if joined:
        p, postings = "t", "RAG_CHUNK_TERM t\n  JOIN RAG_CHUNK c ON c.CHUNK_ID = t.CHUNK_ID"
        postings_on = "RAG_CHUNK_TERM t ON t.TERM = w.TERM\n  JOIN RAG_CHUNK c ON c.CHUNK_ID = t.CHUNK_ID"
        filters = FILTERS
    else:
        p, postings, postings_on, filters = (
            "c",
            "RAG_CHUNK_TERM c",
            "RAG_CHUNK_TERM c ON c.TERM = w.TERM",
            POSTING_FILTERS,
        )
    return _KEYWORD_TOP.format(
        terms=rows,
        visible=visible,
        p=p,
        postings=postings,
        group_chunks=_GROUP_CHUNKS[scope_side or side],
        scope_join=join,
        postings_on=postings_on,
        term_list=", ".join(f":t{i}" for i in range(terms)),
        scope=scope,
        filters=filters,
        materialized=_MATERIALIZED[side],
        best=_BEST[side],
        impact_p=_IMPACT.format(p=p),
        impact_x=_IMPACT.format(p="x"),
        **{name: rows_clause[side] for name, rows_clause in _ROWS.items()},
    )


@lru_cache(maxsize=4 * MAX_QUERY_TERMS)
def keyword_top(terms: int, *, stats_bound: bool = False, joined: bool = False) -> Sql:
    """The BM25 top-k statement for ``terms`` distinct query terms (1..MAX_QUERY_TERMS).

    ``stats_bound``: N and the total length come as binds (``:n``,
    ``:total_length``, from KEYWORD_STATS) rather than from a scan of the
    visible records in the statement. Oracle has only that form (its
    statistics come from the server result cache); the embedded engine scans
    in the statement when its statistics cache is off.
    ``joined``: each posting joined to its chunk, for a search with a
    ``where`` fragment (only that form carries the marker).
    """
    if isinstance(terms, bool) or not isinstance(terms, int) or not 1 <= terms <= MAX_QUERY_TERMS:
        raise ValueError(f"keyword_top takes 1..{MAX_QUERY_TERMS} terms, got {terms!r}")
    return Sql(
        oracle=_keyword_top_text("oracle", terms, True, joined) if stats_bound else None,
        sqlite=_keyword_top_text("sqlite", terms, stats_bound, joined),
        expanding=("f_types",),
    )


def keyword_binds(terms: Mapping[str, int]) -> dict[str, Any]:
    """The term binds of :func:`keyword_top`: ``t<i>`` the i-th term in sorted order, ``f<i>`` its count."""
    if not 1 <= len(terms) <= MAX_QUERY_TERMS:
        raise ValueError(f"keyword search takes 1..{MAX_QUERY_TERMS} terms, got {len(terms)}")
    out: dict[str, Any] = {}
    for i, term in enumerate(sorted(terms)):
        out[f"t{i}"] = term
        out[f"f{i}"] = int(terms[term])
    return out


# The Oracle form as the golden and parse tests pin it (one and three terms;
# the other forms differ only in the number of :t/:f binds).
KEYWORD_TOP_FORMS = {
    "KEYWORD_TOP_1_TERM": keyword_top(1, stats_bound=True),
    "KEYWORD_TOP_3_TERMS": keyword_top(3, stats_bound=True),
    "KEYWORD_TOP_2_TERMS_JOINED": keyword_top(2, stats_bound=True, joined=True),
}

# The chunks of the best records (by their chunk 0 id), scope re-applied: the
# snippet is the chunk holding most of the query (bm25.passage_weight).
KEYWORD_PASSAGES = Sql.both(
    f"""SELECT p.CHUNK_ID, p.SOURCE_TYPE, p.SOURCE_ID, p.CONTENT, c.TERM_COUNT AS SCORE,
       p.OWNER_ID, p.PROJECT_ID, p.SPRINT_ID, p.CHUNK_NO, p.FACETS, c.CHUNK_ID AS RECORD_CHUNK_ID
FROM RAG_CHUNK c
JOIN RAG_CHUNK p ON p.SOURCE_TYPE = c.SOURCE_TYPE AND p.SOURCE_ID = c.SOURCE_ID
WHERE c.CHUNK_ID IN :ids
  AND {SCOPE_OF_IDS}
  AND {FILTERS}
ORDER BY c.CHUNK_ID, p.CHUNK_NO""",
    expanding=("f_types", "ids"),
)

# One row per record (its nearest chunk), exact: when the chunk-level top list
# held fewer than k records, or (embedded) when the in-process index cannot answer.
_SQLITE_SEMANTIC_RECORDS_BY_VECTOR = f"""WITH ranked AS (
  SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, vec_distance_cosine(c.{{embedding}}, :qvec) AS SCORE
  FROM RAG_CHUNK c
  WHERE {SCOPE}
    AND {FILTERS}
), best AS (
  SELECT r.CHUNK_ID, r.SCORE,
         ROW_NUMBER() OVER (PARTITION BY r.SOURCE_TYPE, r.SOURCE_ID ORDER BY r.SCORE, r.CHUNK_ID) AS RN
  FROM ranked r
)
SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT, b.SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM best b
JOIN RAG_CHUNK c ON c.CHUNK_ID = b.CHUNK_ID
WHERE b.RN = 1
ORDER BY b.SCORE, c.CHUNK_ID
LIMIT :k"""
SEMANTIC_RECORDS = Sql(
    oracle=f"""WITH q AS (SELECT VECTOR_EMBEDDING({{model}} USING :query AS data) AS v FROM dual),
ranked AS (
  SELECT c.CHUNK_ID, VECTOR_DISTANCE(c.{{embedding}}, q.v, COSINE) AS SCORE,
         ROW_NUMBER() OVER (PARTITION BY c.SOURCE_TYPE, c.SOURCE_ID
                            ORDER BY VECTOR_DISTANCE(c.{{embedding}}, q.v, COSINE), c.CHUNK_ID) AS RN
  FROM RAG_CHUNK c CROSS JOIN q {SCOPE_JOIN}
  WHERE {SCOPE_JOINED}
    AND {FILTERS}
)
SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT, r.SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM ranked r
JOIN RAG_CHUNK c ON c.CHUNK_ID = r.CHUNK_ID
WHERE r.RN = 1
ORDER BY r.SCORE, c.CHUNK_ID
FETCH FIRST :k ROWS ONLY""",
    sqlite="WITH q AS (SELECT vector_embedding({model}, :query) AS v), "
    + _SQLITE_SEMANTIC_RECORDS_BY_VECTOR.replace(":qvec", "(SELECT v FROM q)").removeprefix("WITH "),
    expanding=("f_types",),
)
SEMANTIC_RECORDS_BY_VECTOR = Sql(sqlite=_SQLITE_SEMANTIC_RECORDS_BY_VECTOR, expanding=("f_types",))

EXPLAIN_SEMANTIC = Sql(oracle="EXPLAIN PLAN FOR " + _ORACLE_SEMANTIC_SEARCH, expanding=("f_types",))

# -- the embedded engine's in-process vector cache (engines/sqlite/vector_cache.py) ------------
# The same scan with the query vector bound (a blob from EMBED): the fallback
# when the cache's candidates do not survive the SQL re-check, so the query
# is not embedded twice.
SEMANTIC_SEARCH_BY_VECTOR = Sql(
    sqlite=f"""SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT,
       vec_distance_cosine(c.{{embedding}}, :qvec) AS SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM RAG_CHUNK c
WHERE {SCOPE}
  AND {FILTERS}
ORDER BY SCORE, c.CHUNK_ID
LIMIT :k""",
    expanding=("f_types",),
)

# The cache's candidates, re-checked: the same scope and filters, the
# distance recomputed in SQL from the stored vector. No LIMIT: the caller
# compares the row count with the candidate count (a row the SQL drops means
# the cache was wrong about it) and keeps the first k.
SEMANTIC_CANDIDATES = Sql(
    sqlite=f"""SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT,
       vec_distance_cosine(c.{{embedding}}, :qvec) AS SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM RAG_CHUNK c
WHERE c.CHUNK_ID IN :ids
  AND {SCOPE_OF_IDS}
  AND {FILTERS}
ORDER BY SCORE, c.CHUNK_ID""",
    expanding=("f_types", "ids"),
)

# -- hybrid search: the legs fetch no text, the fused top k do (search/hybrid.py) -----------
# The cache's candidates re-checked as SEMANTIC_CANDIDATES does, without the
# text: CONTENT comes back empty and FACETS NULL (hits() reads them as "" and {}).
SEMANTIC_CANDIDATE_KEYS = Sql(
    sqlite=f"""SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, '' AS CONTENT,
       vec_distance_cosine(c.{{embedding}}, :qvec) AS SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, NULL AS FACETS
FROM RAG_CHUNK c
WHERE c.CHUNK_ID IN :ids
  AND {SCOPE_OF_IDS}
  AND {FILTERS}
ORDER BY SCORE, c.CHUNK_ID""",
    expanding=("f_types", "ids"),
)

# The best records of a keyword leg (their chunk 0 ids), scope re-applied,
# without text; the passage is chosen later, for the fused top k only.
KEYS_OF_RECORDS = Sql.both(
    f"""SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, '' AS CONTENT, c.TERM_COUNT AS SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, NULL AS FACETS, c.CHUNK_ID AS RECORD_CHUNK_ID
FROM RAG_CHUNK c
WHERE c.CHUNK_ID IN :ids
  AND {SCOPE_OF_IDS}
  AND {FILTERS}""",
    expanding=("f_types", "ids"),
)

# The text of hybrid's fused top k (Engine.shown_chunks), scope re-applied:
# every chunk of the records in :passage_ids (their chunk 0 ids: the passage
# is chosen among them, as KEYWORD_PASSAGES gives them) and the chunk itself
# for the other ids; one statement for both kinds.
SHOWN_CHUNKS = Sql.both(
    f"""SELECT p.CHUNK_ID, p.SOURCE_TYPE, p.SOURCE_ID, p.CONTENT, c.TERM_COUNT AS SCORE,
       p.OWNER_ID, p.PROJECT_ID, p.SPRINT_ID, p.CHUNK_NO, p.FACETS, c.CHUNK_ID AS RECORD_CHUNK_ID
FROM RAG_CHUNK c
JOIN RAG_CHUNK p ON p.SOURCE_TYPE = c.SOURCE_TYPE AND p.SOURCE_ID = c.SOURCE_ID
WHERE c.CHUNK_ID IN :ids
  AND (p.CHUNK_ID = c.CHUNK_ID OR c.CHUNK_ID IN :passage_ids)
  AND {SCOPE_OF_IDS}
  AND {FILTERS}
ORDER BY c.CHUNK_ID, p.CHUNK_NO""",
    expanding=("f_types", "ids", "passage_ids"),
)

# Hybrid's semantic leg from the cache (SqliteEngine.propose_semantic): the
# distances SQL computes for candidates whose cache distances are too close
# to order by them (float32 dot products in numpy and in sqlite-vec differ by
# ~1e-7), so the leg ranks exactly as SEMANTIC_CANDIDATE_KEYS would. No scope:
# the records shown are re-checked with it (search/hybrid.py shown_with_text).
CANDIDATE_DISTANCES = Sql(
    sqlite="""SELECT c.CHUNK_ID, vec_distance_cosine(c.{embedding}, :qvec) AS SCORE
FROM RAG_CHUNK c
WHERE c.CHUNK_ID IN (SELECT value FROM json_each(:ids))"""
)

# What the cache holds per chunk: the scope and filter columns and the vector.
# The cache reads on its own plain DBAPI connection (no expanding binds):
# :ids is a JSON array of integers.
_VECTOR_ROWS = (
    "SELECT CHUNK_ID, SOURCE_TYPE, OWNER_ID, PROJECT_ID, SPRINT_ID, {embedding}, "
    "ACCESS_OWNER, ACCESS_PUBLIC, ACCESS_GROUPS, CHUNK_NO, SOURCE_ID, {embedding}_GEN FROM RAG_CHUNK"
)
VECTOR_ROWS = Sql(sqlite=_VECTOR_ROWS)
VECTOR_ROWS_BY_ID = Sql(sqlite=_VECTOR_ROWS + " WHERE CHUNK_ID IN (SELECT value FROM json_each(:ids))")

# Where the change log stands in this snapshot: the oldest retained row and
# the highest SEQ ever assigned (sqlite_sequence survives pruning, so an
# emptied log still tells a lagging reader that it missed changes).
CHUNK_LOG_STATE = Sql(
    sqlite="""SELECT (SELECT MIN(SEQ) FROM RAG_CHUNK_LOG) AS OLDEST,
       (SELECT seq FROM sqlite_sequence WHERE name = 'RAG_CHUNK_LOG') AS NEWEST"""
)

CHUNK_LOG_CHANGES = Sql(
    sqlite="SELECT DISTINCT CHUNK_ID FROM RAG_CHUNK_LOG WHERE SEQ > :after AND SEQ <= :upto"
)

# Keep the newest :keep rows; always deletes a prefix, so the rows left are a
# contiguous suffix and a reader detects a gap from MIN(SEQ) alone.
PRUNE_CHUNK_LOG = Sql(
    sqlite="DELETE FROM RAG_CHUNK_LOG WHERE SEQ <= (SELECT MAX(SEQ) FROM RAG_CHUNK_LOG) - :keep"
)

CHUNK_LOG_EXISTS = Sql(
    sqlite="SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'RAG_CHUNK_LOG'"
)


# -- the in-process BM25 index (engines/sqlite/term_index.py) ---------------------------
# Records (chunk 0 of each analysed record) with their scope columns and length.
_TERM_RECORDS = """SELECT CHUNK_ID, SOURCE_TYPE, OWNER_ID, PROJECT_ID, SPRINT_ID, TERM_COUNT,
       ACCESS_OWNER, ACCESS_PUBLIC, ACCESS_GROUPS, SOURCE_ID FROM RAG_CHUNK
WHERE CHUNK_NO = 0 AND TERM_COUNT IS NOT NULL"""
TERM_RECORDS = Sql(sqlite=_TERM_RECORDS)
TERM_RECORDS_BY_ID = Sql(sqlite=_TERM_RECORDS + " AND CHUNK_ID IN (SELECT value FROM json_each(:ids))")
# All postings, one row per term (ids and frequencies as comma-separated text,
# in the same row order): parsed by numpy, far faster than one row per posting.
TERM_POSTINGS = Sql(
    sqlite="SELECT TERM, group_concat(CHUNK_ID), group_concat(TF) FROM RAG_CHUNK_TERM GROUP BY TERM"
)
TERM_POSTINGS_BY_ID = Sql(
    sqlite="""SELECT TERM, CHUNK_ID, TF FROM RAG_CHUNK_TERM
WHERE CHUNK_ID IN (SELECT value FROM json_each(:ids))"""
)
