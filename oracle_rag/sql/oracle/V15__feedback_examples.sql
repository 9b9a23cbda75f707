-- V15: accepted answers as question -> SQL examples that never cross callers (Oracle).
-- EXAMPLE_QUESTION / EXAMPLE_SQL: the rated question and its guarded SQL with every
-- literal (string, number, date) replaced by a placeholder, written when an answer
-- is rated up; an example offers only these, never the text the caller typed.
-- APPROVED_AT: set by `oracle-rag feedback approve`; until then an example is
-- offered only to the caller who rated it. Only the newest rating of an answer counts.
-- Ratings stored before this version have no example text and are never offered.
-- Each statement commits on its own; a re-run resumes at the first one that
-- did not complete (see migrations.py).

ALTER TABLE RAG_FEEDBACK ADD (
  EXAMPLE_QUESTION  CLOB,
  EXAMPLE_SQL       CLOB,
  APPROVED_AT       TIMESTAMP WITH TIME ZONE
);

CREATE INDEX RAG_FEEDBACK_CALLER_IX ON RAG_FEEDBACK (CALLER_ID, FEEDBACK_ID);
