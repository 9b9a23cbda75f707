"""Every statement the Oracle engine sends, in one place.

``{model}`` is the only thing formatted into SQL: the embedding model's
name, which Oracle takes as an identifier (not a bind) in
``VECTOR_EMBEDDING``. It is validated as an unquoted identifier by
configuration and again by :func:`render` before use. Everything else is a
``:named`` bind. ``tests/test_oracle_golden.py`` pins every statement.
"""

from __future__ import annotations

import re

_IDENT = re.compile(r"^[A-Za-z][A-Za-z0-9_$#]{0,122}$")


def render(template: str, model: str) -> str:
    """Fill ``{model}`` after validating it; refuse anything that is not an identifier."""
    if not _IDENT.match(model):
        raise ValueError("embedding model name must be an unquoted identifier")
    return template.replace("{model}", model.upper())


HISTORY_DDL = [
    """CREATE TABLE IF NOT EXISTS RAG_SCHEMA_HISTORY (
  MIGRATION_SET   VARCHAR2(32 CHAR)  NOT NULL,
  VERSION         NUMBER             NOT NULL,
  DESCRIPTION     VARCHAR2(200 CHAR) NOT NULL,
  CHECKSUM        VARCHAR2(64 CHAR)  NOT NULL,
  STATEMENTS_DONE NUMBER DEFAULT 0   NOT NULL,
  SUCCESS         NUMBER(1) DEFAULT 0 NOT NULL,
  APPLIED_AT      TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
  CONSTRAINT RAG_SCHEMA_HISTORY_PK PRIMARY KEY (MIGRATION_SET, VERSION)
)""",
]

SCOPE = (
    "(:see_all = 1 OR c.OWNER_ID = :caller_id "
    "OR (c.OWNER_ID IS NULL AND c.SOURCE_TYPE <> 'TASK'))"
)
FILTERS = (
    "(:f_project IS NULL OR c.PROJECT_ID = :f_project) "
    "AND (:f_sprint IS NULL OR c.SPRINT_ID = :f_sprint) "
    "AND (:f_all_types = 1 OR c.SOURCE_TYPE IN :f_types) "
    "AND /* where */ 1 = 1"
)

EMBED = "SELECT VECTOR_EMBEDDING({model} USING :text AS data) AS EMBEDDING FROM dual"

MODEL_STATUS = """SELECT MODEL_NAME, MINING_FUNCTION, ALGORITHM, CREATION_DATE
FROM USER_MINING_MODELS
WHERE MODEL_NAME = :model_name"""

MODEL_EXISTS = "SELECT COUNT(*) FROM USER_MINING_MODELS WHERE MODEL_NAME = :model_name"

# The hash plus the scope columns: a chunk whose text is unchanged but whose
# owner/project/sprint changed (a task reassigned to a namesake) must still
# be rewritten, or the access scope would follow the old owner.
# Per record: chunk 0 carries the record's hash, scope and facets (every
# chunk of a record has the same ones).
READ_CHUNK_STATE = (
    "SELECT SOURCE_ID, CONTENT_HASH, OWNER_ID, PROJECT_ID, SPRINT_ID, FACETS FROM RAG_CHUNK "
    "WHERE SOURCE_TYPE = :source_type AND SOURCE_ID IN :ids AND CHUNK_NO = 0"
)

# The text is embedded inside the database by the loaded ONNX model.
# :embed_text is the content cut to 4000 bytes (VARCHAR2); :content is a CLOB.
UPSERT_CHUNK = """MERGE INTO RAG_CHUNK t
USING (SELECT :source_type AS SOURCE_TYPE, :source_id AS SOURCE_ID, :chunk_no AS CHUNK_NO FROM dual) s
ON (t.SOURCE_TYPE = s.SOURCE_TYPE AND t.SOURCE_ID = s.SOURCE_ID AND t.CHUNK_NO = s.CHUNK_NO)
WHEN MATCHED THEN UPDATE SET
  t.OWNER_ID = :owner_id,
  t.PROJECT_ID = :project_id,
  t.SPRINT_ID = :sprint_id,
  t.FACETS = JSON(:facets),
  t.CONTENT = :content,
  t.EMBEDDING = VECTOR_EMBEDDING({model} USING :embed_text AS data),
  t.CONTENT_HASH = :content_hash,
  t.UPDATED_AT = SYSTIMESTAMP
WHEN NOT MATCHED THEN INSERT
  (SOURCE_TYPE, SOURCE_ID, CHUNK_NO, OWNER_ID, PROJECT_ID, SPRINT_ID, FACETS, CONTENT, EMBEDDING,
   CONTENT_HASH, UPDATED_AT)
VALUES
  (s.SOURCE_TYPE, s.SOURCE_ID, s.CHUNK_NO, :owner_id, :project_id, :sprint_id, JSON(:facets), :content,
   VECTOR_EMBEDDING({model} USING :embed_text AS data), :content_hash, SYSTIMESTAMP)"""

CHUNK_IDS = "SELECT DISTINCT SOURCE_ID FROM RAG_CHUNK WHERE SOURCE_TYPE = :source_type"

QUEUED_IDS = "SELECT DISTINCT SOURCE_ID FROM RAG_DIRTY WHERE SOURCE_TYPE = :source_type AND ACTION = 'UPSERT'"

# A record's chunks go together (hash-skip and delete work per record).
DELETE_CHUNK = "DELETE FROM RAG_CHUNK WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id"

# After a record is rewritten with :chunk_count chunks: drop the chunks it no longer has.
DELETE_EXTRA_CHUNKS = (
    "DELETE FROM RAG_CHUNK WHERE SOURCE_TYPE = :source_type AND SOURCE_ID = :source_id "
    "AND CHUNK_NO >= :chunk_count"
)

ENQUEUE = "INSERT INTO RAG_DIRTY (SOURCE_TYPE, SOURCE_ID, ACTION) VALUES (:source_type, :source_id, :action)"

# No FETCH FIRST here: FETCH FIRST + FOR UPDATE raises ORA-02014, and a
# ROWNUM or ROWID-subquery limit is applied before locking, so it returns
# short batches while unlocked rows wait. Instead the cursor is opened with
# no limit and the worker fetches exactly `batch_size` rows with
# arraysize = prefetchrows = batch_size: SKIP LOCKED locks rows as they are
# fetched, so only the rows we take are locked.
PICK = """SELECT DIRTY_ID, SOURCE_TYPE, SOURCE_ID, ACTION, ATTEMPTS, ENQUEUED_AT, LAST_ERROR
FROM RAG_DIRTY
WHERE ATTEMPTS < :max_attempts
ORDER BY ENQUEUED_AT, DIRTY_ID
FOR UPDATE SKIP LOCKED"""

DELETE_QUEUE_ROW = "DELETE FROM RAG_DIRTY WHERE DIRTY_ID = :dirty_id"

FAIL_QUEUE_ROW = (
    "UPDATE RAG_DIRTY SET ATTEMPTS = ATTEMPTS + 1, LAST_ERROR = :error WHERE DIRTY_ID = :dirty_id"
)

RETRY_FAILED = "UPDATE RAG_DIRTY SET ATTEMPTS = 0 WHERE ATTEMPTS >= :max_attempts"

LIST_QUEUE = """SELECT DIRTY_ID, SOURCE_TYPE, SOURCE_ID, ACTION, ATTEMPTS, ENQUEUED_AT, LAST_ERROR
FROM RAG_DIRTY
WHERE (:failed_only = 0 OR ATTEMPTS >= :max_attempts)
ORDER BY ENQUEUED_AT, DIRTY_ID
FETCH FIRST :limit ROWS ONLY"""

# The oldest row's age from the interval SYSTIMESTAMP - ENQUEUED_AT. Both are
# TIMESTAMP WITH TIME ZONE, and Oracle does datetime arithmetic on them in UTC
# (SQL Language Reference, "Datetime and Interval Arithmetic"), so the age is
# right across a DST change; CAST(... AS DATE) would drop the offsets and be
# an hour off when the row was enqueued under the other one.
QUEUE_STATS = """SELECT DEPTH, OLDEST, STALLED, FAILED,
  EXTRACT(DAY FROM AGE) * 86400 + EXTRACT(HOUR FROM AGE) * 3600
    + EXTRACT(MINUTE FROM AGE) * 60 + EXTRACT(SECOND FROM AGE) AS OLDEST_AGE_S
FROM (
  SELECT COUNT(*) AS DEPTH,
    MIN(ENQUEUED_AT) AS OLDEST,
    SUM(CASE WHEN ATTEMPTS >= 3 THEN 1 ELSE 0 END) AS STALLED,
    SUM(CASE WHEN ATTEMPTS >= :max_attempts THEN 1 ELSE 0 END) AS FAILED,
    SYSTIMESTAMP - MIN(ENQUEUED_AT) AS AGE
  FROM RAG_DIRTY
)"""

CHUNKS_BY_TYPE = "SELECT SOURCE_TYPE, COUNT(*) AS N FROM RAG_CHUNK GROUP BY SOURCE_TYPE ORDER BY SOURCE_TYPE"

# The scope predicate sits inside the statement, before the top-k, so a
# scoped query still returns k rows when k are visible. With the IVF index
# the optimizer chooses a pre-filter or post-filter plan (see the plan test);
# a post-filter plan can still come back short, so the engine re-runs the
# EXACT form when the APPROX one returns fewer than k (OracleEngine.semantic_search).
# The query is embedded once: ORDER BY names the select-list alias (as
# langchain-oracledb's OracleVS does: "vector_distance(...) as distance ...
# ORDER BY distance FETCH APPROX FIRST k ROWS ONLY"), so VECTOR_EMBEDDING
# appears a single time and the distance stays the only sort key an
# approximate top-k accepts.
SEMANTIC_SEARCH = f"""SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT,
       VECTOR_DISTANCE(c.EMBEDDING, VECTOR_EMBEDDING({{model}} USING :query AS data), COSINE) AS DISTANCE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM RAG_CHUNK c
WHERE {SCOPE}
  AND {FILTERS}
ORDER BY DISTANCE
FETCH APPROX FIRST :k ROWS ONLY"""

# EXACT: guaranteed full scan: the recall reference, and the fallback of a short APPROX result.
SEMANTIC_SEARCH_EXACT = SEMANTIC_SEARCH.replace("FETCH APPROX FIRST", "FETCH EXACT FIRST")

KEYWORD_SEARCH = f"""SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT,
       SCORE(1) AS SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM RAG_CHUNK c
WHERE CONTAINS(c.CONTENT, :match, 1) > 0
  AND {SCOPE}
  AND {FILTERS}
ORDER BY SCORE(1) DESC, c.CHUNK_ID
FETCH FIRST :k ROWS ONLY"""

EXPLAIN_SEMANTIC = "EXPLAIN PLAN FOR " + SEMANTIC_SEARCH
