"""Every statement the embedded (SQLite) engine sends, in one place.

Binds are ``:named``; nothing is ever formatted into these strings except the
list of source types, which goes through SQLAlchemy's expanding bind.
"""

HISTORY_DDL = [
    """CREATE TABLE IF NOT EXISTS RAG_SCHEMA_HISTORY (
  MIGRATION_SET   TEXT    NOT NULL,
  VERSION         INTEGER NOT NULL,
  DESCRIPTION     TEXT    NOT NULL,
  CHECKSUM        TEXT    NOT NULL,
  STATEMENTS_DONE INTEGER NOT NULL DEFAULT 0,
  SUCCESS         INTEGER NOT NULL DEFAULT 0,
  APPLIED_AT      TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now')),
  PRIMARY KEY (MIGRATION_SET, VERSION)
)""",
]

# The access scope, one predicate for every search statement: managers and
# admins see everything; others see organisational chunks (no owner, not a
# task) and the chunks they own.
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

EMBED = "SELECT vector_embedding(:text) AS EMBEDDING"

# The hash plus the scope columns: a chunk whose text is unchanged but whose
# owner/project/sprint changed (a task reassigned to a namesake) must still
# be rewritten, or the access scope would follow the old owner.
# Per record: chunk 0 carries the record's hash, scope and facets (every
# chunk of a record has the same ones).
READ_CHUNK_STATE = (
    "SELECT SOURCE_ID, CONTENT_HASH, OWNER_ID, PROJECT_ID, SPRINT_ID, FACETS FROM RAG_CHUNK "
    "WHERE SOURCE_TYPE = :source_type AND SOURCE_ID IN :ids AND CHUNK_NO = 0"
)

UPSERT_CHUNK = """INSERT INTO RAG_CHUNK
  (SOURCE_TYPE, SOURCE_ID, CHUNK_NO, OWNER_ID, PROJECT_ID, SPRINT_ID, FACETS, CONTENT, EMBEDDING,
   CONTENT_HASH, UPDATED_AT)
VALUES
  (:source_type, :source_id, :chunk_no, :owner_id, :project_id, :sprint_id, :facets, :content,
   vector_embedding(:embed_text), :content_hash, strftime('%Y-%m-%dT%H:%M:%f', 'now'))
ON CONFLICT (SOURCE_TYPE, SOURCE_ID, CHUNK_NO) DO UPDATE SET
  OWNER_ID = excluded.OWNER_ID,
  PROJECT_ID = excluded.PROJECT_ID,
  SPRINT_ID = excluded.SPRINT_ID,
  FACETS = excluded.FACETS,
  CONTENT = excluded.CONTENT,
  EMBEDDING = excluded.EMBEDDING,
  CONTENT_HASH = excluded.CONTENT_HASH,
  UPDATED_AT = excluded.UPDATED_AT"""

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

# Runs inside BEGIN IMMEDIATE: the write lock is held from the pick to the
# commit, so two processes never work on the same rows, and a crash rolls
# the whole batch back with the queue rows intact.
PICK = """SELECT DIRTY_ID, SOURCE_TYPE, SOURCE_ID, ACTION, ATTEMPTS, ENQUEUED_AT, LAST_ERROR
FROM RAG_DIRTY
WHERE ATTEMPTS < :max_attempts
ORDER BY ENQUEUED_AT, DIRTY_ID
LIMIT :limit"""

DELETE_QUEUE_ROW = "DELETE FROM RAG_DIRTY WHERE DIRTY_ID = :dirty_id"

FAIL_QUEUE_ROW = (
    "UPDATE RAG_DIRTY SET ATTEMPTS = ATTEMPTS + 1, LAST_ERROR = :error WHERE DIRTY_ID = :dirty_id"
)

RETRY_FAILED = "UPDATE RAG_DIRTY SET ATTEMPTS = 0 WHERE ATTEMPTS >= :max_attempts"

LIST_QUEUE = """SELECT DIRTY_ID, SOURCE_TYPE, SOURCE_ID, ACTION, ATTEMPTS, ENQUEUED_AT, LAST_ERROR
FROM RAG_DIRTY
WHERE (:failed_only = 0 OR ATTEMPTS >= :max_attempts)
ORDER BY ENQUEUED_AT, DIRTY_ID
LIMIT :limit"""

QUEUE_STATS = """SELECT COUNT(*) AS DEPTH,
  MIN(ENQUEUED_AT) AS OLDEST,
  SUM(CASE WHEN ATTEMPTS >= 3 THEN 1 ELSE 0 END) AS STALLED,
  SUM(CASE WHEN ATTEMPTS >= :max_attempts THEN 1 ELSE 0 END) AS FAILED,
  (julianday('now') - julianday(MIN(ENQUEUED_AT))) * 86400.0 AS OLDEST_AGE_S
FROM RAG_DIRTY"""

CHUNKS_BY_TYPE = "SELECT SOURCE_TYPE, COUNT(*) AS N FROM RAG_CHUNK GROUP BY SOURCE_TYPE ORDER BY SOURCE_TYPE"

# Exact cosine scan; the query is embedded once in the CTE.
SEMANTIC_SEARCH = f"""WITH q AS (SELECT vector_embedding(:query) AS v)
SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT,
       vec_distance_cosine(c.EMBEDDING, (SELECT v FROM q)) AS SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM RAG_CHUNK c
WHERE {SCOPE}
  AND {FILTERS}
ORDER BY SCORE, c.CHUNK_ID
LIMIT :k"""

# No approximate index on the embedded engine: exact is the only mode.
SEMANTIC_SEARCH_EXACT = SEMANTIC_SEARCH

# -- the in-process vector cache (engines/vector_cache.py) -----------------------
# The same scan with the query vector bound (a blob from EMBED): the fallback
# when the cache's candidates do not survive the SQL re-check, so the query
# is not embedded twice.
SEMANTIC_SEARCH_BY_VECTOR = f"""SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT,
       vec_distance_cosine(c.EMBEDDING, :qvec) AS SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM RAG_CHUNK c
WHERE {SCOPE}
  AND {FILTERS}
ORDER BY SCORE, c.CHUNK_ID
LIMIT :k"""

# The cache's candidates, re-checked: the same scope and filters, the
# distance recomputed in SQL from the stored vector. No LIMIT: the caller
# compares the row count with the candidate count (a row the SQL drops means
# the cache was wrong about it) and keeps the first k.
SEMANTIC_CANDIDATES = f"""SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT,
       vec_distance_cosine(c.EMBEDDING, :qvec) AS SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM RAG_CHUNK c
WHERE c.CHUNK_ID IN :ids
  AND {SCOPE}
  AND {FILTERS}
ORDER BY SCORE, c.CHUNK_ID"""

# What the cache holds per chunk: the scope and filter columns and the vector.
# The cache reads on its own plain DBAPI connection (no expanding binds):
# :ids is a JSON array of integers.
VECTOR_ROWS = "SELECT CHUNK_ID, SOURCE_TYPE, OWNER_ID, PROJECT_ID, SPRINT_ID, EMBEDDING FROM RAG_CHUNK"
VECTOR_ROWS_BY_ID = VECTOR_ROWS + " WHERE CHUNK_ID IN (SELECT value FROM json_each(:ids))"

# Where the change log stands in this snapshot: the oldest retained row and
# the highest SEQ ever assigned (sqlite_sequence survives pruning, so an
# emptied log still tells a lagging reader that it missed changes).
CHUNK_LOG_STATE = """SELECT (SELECT MIN(SEQ) FROM RAG_CHUNK_LOG) AS OLDEST,
       (SELECT seq FROM sqlite_sequence WHERE name = 'RAG_CHUNK_LOG') AS NEWEST"""

CHUNK_LOG_CHANGES = "SELECT DISTINCT CHUNK_ID FROM RAG_CHUNK_LOG WHERE SEQ > :after AND SEQ <= :upto"

# Keep the newest :keep rows; always deletes a prefix, so the rows left are a
# contiguous suffix and a reader detects a gap from MIN(SEQ) alone.
PRUNE_CHUNK_LOG = "DELETE FROM RAG_CHUNK_LOG WHERE SEQ <= (SELECT MAX(SEQ) FROM RAG_CHUNK_LOG) - :keep"

CHUNK_LOG_EXISTS = "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = 'RAG_CHUNK_LOG'"

KEYWORD_SEARCH = f"""SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT,
       -bm25(RAG_CHUNK_FTS) AS SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.CHUNK_NO, c.FACETS
FROM RAG_CHUNK_FTS
JOIN RAG_CHUNK c ON c.CHUNK_ID = RAG_CHUNK_FTS.rowid
WHERE RAG_CHUNK_FTS MATCH :match
  AND {SCOPE}
  AND {FILTERS}
ORDER BY bm25(RAG_CHUNK_FTS), c.CHUNK_ID
LIMIT :k"""
