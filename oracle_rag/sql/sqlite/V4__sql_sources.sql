-- V4: state of SQL-query knowledge sources (embedded engine).
-- RAG_SQL_SOURCE: one row per configured source: status, last refresh,
-- incremental watermark, last error (class and code only), document count.
-- RAG_SQL_DOCUMENT: one row per indexed row of a source: the hash over its
-- id, content, title, owner and metadata (what a refresh compares) and the
-- metadata as JSON. The chunk itself lives in RAG_CHUNK with
-- SOURCE_TYPE = source name and SOURCE_ID = '<source name>#<row id>'.
-- Times are ISO-8601 text in UTC.

CREATE TABLE RAG_SQL_SOURCE (
  SOURCE_NAME      TEXT    NOT NULL PRIMARY KEY,
  STATUS           TEXT    NOT NULL DEFAULT 'new' CHECK (STATUS IN ('new', 'ok', 'failed')),
  DEFINITION_HASH  TEXT,
  REFRESH_SEQ      INTEGER NOT NULL DEFAULT 0,
  LAST_ATTEMPT_AT  TEXT,
  LAST_REFRESH_AT  TEXT,
  LAST_FULL_AT     TEXT,
  WATERMARK        TEXT,
  WATERMARK_KIND   TEXT    CHECK (WATERMARK_KIND IN ('datetime', 'date', 'text')),
  DOC_COUNT        INTEGER NOT NULL DEFAULT 0,
  ROWS_READ        INTEGER,
  LAST_MODE        TEXT,
  LAST_ERROR       TEXT,
  LAST_ERROR_CODE  TEXT
);

CREATE TABLE RAG_SQL_DOCUMENT (
  SOURCE_NAME  TEXT NOT NULL REFERENCES RAG_SQL_SOURCE (SOURCE_NAME) ON DELETE CASCADE,
  ROW_ID       TEXT NOT NULL,
  DOC_HASH     TEXT NOT NULL,
  METADATA     TEXT NOT NULL CHECK (json_valid(METADATA)),
  UPDATED_AT   TEXT NOT NULL,
  PRIMARY KEY (SOURCE_NAME, ROW_ID)
) WITHOUT ROWID;
