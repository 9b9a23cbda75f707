-- V13: BM25 in SQL reads the query terms' postings and nothing else (issue 24, N9).
-- (a) Each posting carries what the keyword statement reads of its record,
--     under the RAG_CHUNK names (engine_sql.POSTING_COLUMNS): the record's
--     length (TERM_COUNT) and the scope and filter columns (SOURCE_TYPE,
--     ACCESS_PUBLIC, ACCESS_OWNER, PROJECT_ID, SPRINT_ID). The statement then
--     reads the postings as the chunk row of SCOPE and the filters, with no
--     join to RAG_CHUNK per posting. The writer copies them from chunk 0 when
--     it writes the postings (INSERT_TERM) and again when a record is
--     re-scoped or its access changes (UPDATE_TERM_SCOPE); a record has
--     postings exactly when its TERM_COUNT is set.
--     SQLite cannot add a NOT NULL column without a default, so the table is
--     rebuilt (create, copy, drop, rename) and filled from RAG_CHUNK; postings
--     of a record not analysed (TERM_COUNT NULL), which the statement never
--     read, are not copied. No embedding, no analysis: the terms are kept.
-- (b) RAG_CHUNK_RECORD_IX: chunk 0 of each analysed record with its length
--     and scope and filter columns, so the visible set's N and total length
--     (KEYWORD_STATS, the statement's visible_set on Oracle) are an
--     index-only scan instead of a scan of the wide chunk rows.

CREATE TABLE RAG_CHUNK_TERM_V13 (
  TERM           TEXT    NOT NULL,
  CHUNK_ID       INTEGER NOT NULL REFERENCES RAG_CHUNK (CHUNK_ID) ON DELETE CASCADE,
  TF             INTEGER NOT NULL CHECK (TF > 0),
  TERM_COUNT     INTEGER NOT NULL CHECK (TERM_COUNT >= 0),
  SOURCE_TYPE    TEXT    NOT NULL,
  ACCESS_PUBLIC  INTEGER NOT NULL CHECK (ACCESS_PUBLIC IN (0, 1)),
  ACCESS_OWNER   INTEGER,
  PROJECT_ID     INTEGER,
  SPRINT_ID      INTEGER,
  PRIMARY KEY (TERM, CHUNK_ID)
) WITHOUT ROWID;

INSERT INTO RAG_CHUNK_TERM_V13
  (TERM, CHUNK_ID, TF, TERM_COUNT, SOURCE_TYPE, ACCESS_PUBLIC, ACCESS_OWNER, PROJECT_ID, SPRINT_ID)
SELECT t.TERM, t.CHUNK_ID, t.TF, c.TERM_COUNT, c.SOURCE_TYPE, c.ACCESS_PUBLIC, c.ACCESS_OWNER, c.PROJECT_ID,
       c.SPRINT_ID
FROM RAG_CHUNK_TERM t
JOIN RAG_CHUNK c ON c.CHUNK_ID = t.CHUNK_ID
WHERE c.CHUNK_NO = 0 AND c.TERM_COUNT IS NOT NULL
ORDER BY t.TERM, t.CHUNK_ID;

DROP TABLE RAG_CHUNK_TERM;

ALTER TABLE RAG_CHUNK_TERM_V13 RENAME TO RAG_CHUNK_TERM;

CREATE INDEX RAG_CHUNK_TERM_CHUNK_IX ON RAG_CHUNK_TERM (CHUNK_ID);

CREATE INDEX RAG_CHUNK_RECORD_IX ON RAG_CHUNK (CHUNK_NO, TERM_COUNT, SOURCE_TYPE, ACCESS_PUBLIC, ACCESS_OWNER, PROJECT_ID, SPRINT_ID);
