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
--     Filled here from RAG_CHUNK (one MERGE: CHUNK_ID is unique in the
--     source); postings of a record not analysed (TERM_COUNT NULL), which the
--     statement never read, are deleted. No embedding, no analysis.
-- (b) RAG_CHUNK_TERM_SCORE_IX: every column the statement reads of a
--     posting, led by TERM, so each query term's postings are one index range
--     scan with no table access (the primary key still enforces uniqueness;
--     COMPRESS 1 stores each term once per leaf block: prefix compression).
-- (c) RAG_CHUNK_RECORD_IX: chunk 0 of each analysed record with its length,
--     scope and filter columns and CHUNK_ID, so the visible set's N and total
--     length (the statement's visible_set) need no access to the chunk rows.
-- Each statement commits on its own; a re-run resumes at the first one that
-- did not complete (see migrations.py).

ALTER TABLE RAG_CHUNK_TERM ADD (
  TERM_COUNT     NUMBER(10),
  SOURCE_TYPE    VARCHAR2(64 CHAR),
  ACCESS_PUBLIC  NUMBER(1),
  ACCESS_OWNER   NUMBER,
  PROJECT_ID     NUMBER,
  SPRINT_ID      NUMBER
);

MERGE INTO RAG_CHUNK_TERM t
USING (SELECT CHUNK_ID, TERM_COUNT, SOURCE_TYPE, ACCESS_PUBLIC, ACCESS_OWNER, PROJECT_ID, SPRINT_ID
       FROM RAG_CHUNK
       WHERE CHUNK_NO = 0 AND TERM_COUNT IS NOT NULL) c
ON (t.CHUNK_ID = c.CHUNK_ID)
WHEN MATCHED THEN UPDATE SET
  t.TERM_COUNT = c.TERM_COUNT,
  t.SOURCE_TYPE = c.SOURCE_TYPE,
  t.ACCESS_PUBLIC = c.ACCESS_PUBLIC,
  t.ACCESS_OWNER = c.ACCESS_OWNER,
  t.PROJECT_ID = c.PROJECT_ID,
  t.SPRINT_ID = c.SPRINT_ID;

DELETE FROM RAG_CHUNK_TERM WHERE TERM_COUNT IS NULL;

ALTER TABLE RAG_CHUNK_TERM MODIFY (
  TERM_COUNT NOT NULL,
  SOURCE_TYPE NOT NULL,
  ACCESS_PUBLIC NOT NULL
);

CREATE INDEX RAG_CHUNK_TERM_SCORE_IX
  ON RAG_CHUNK_TERM (TERM, CHUNK_ID, TF, TERM_COUNT, SOURCE_TYPE, ACCESS_PUBLIC, ACCESS_OWNER, PROJECT_ID, SPRINT_ID)
  COMPRESS 1;

CREATE INDEX RAG_CHUNK_RECORD_IX
  ON RAG_CHUNK (CHUNK_NO, TERM_COUNT, SOURCE_TYPE, ACCESS_PUBLIC, ACCESS_OWNER, PROJECT_ID, SPRINT_ID, CHUNK_ID);
