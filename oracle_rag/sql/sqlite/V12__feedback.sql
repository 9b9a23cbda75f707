-- V12: feedback on answers (issue 26, embedded engine).
-- (a) RAG_MESSAGE keeps, for an assistant message, what was understood (the
--     structured part's kind and filters, JSON) and the guarded SQL that ran,
--     so a rating can carry them without re-answering.
-- (b) RAG_FEEDBACK: one row per rating (a re-rating adds a row; the newest
--     counts). UNDERSTOOD and GUARDED_SQL are copied from the rated message;
--     never the rows an answer showed.

ALTER TABLE RAG_MESSAGE ADD COLUMN UNDERSTOOD TEXT CHECK (UNDERSTOOD IS NULL OR json_valid(UNDERSTOOD));

ALTER TABLE RAG_MESSAGE ADD COLUMN GUARDED_SQL TEXT;

CREATE TABLE RAG_FEEDBACK (
  FEEDBACK_ID  INTEGER PRIMARY KEY AUTOINCREMENT,
  MESSAGE_ID   INTEGER NOT NULL REFERENCES RAG_MESSAGE (MESSAGE_ID) ON DELETE CASCADE,
  CALLER_ID    INTEGER NOT NULL,
  RATING       INTEGER NOT NULL CHECK (RATING IN (-1, 1)),
  COMMENT_TEXT TEXT    CHECK (COMMENT_TEXT IS NULL OR length(COMMENT_TEXT) <= 2000),
  UNDERSTOOD   TEXT    CHECK (UNDERSTOOD IS NULL OR json_valid(UNDERSTOOD)),
  GUARDED_SQL  TEXT,
  CREATED_AT   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now'))
);

CREATE INDEX RAG_FEEDBACK_CREATED_IX ON RAG_FEEDBACK (CREATED_AT);

CREATE INDEX RAG_FEEDBACK_MESSAGE_IX ON RAG_FEEDBACK (MESSAGE_ID);
