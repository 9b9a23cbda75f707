-- V6: several chunks per record, facets, and what BM25 needs (embedded engine).
-- (a) A record (SOURCE_TYPE, SOURCE_ID) whose text exceeds the model window
--     becomes chunks CHUNK_NO = 0, 1, ... sharing the record's scope columns
--     and facets: the unique key becomes (SOURCE_TYPE, SOURCE_ID, CHUNK_NO).
-- (b) FACETS: a JSON object (as text) of the record's facet values, the same
--     on every chunk of the record; '{}' when the source declares none.
-- (c) TERM_COUNT and RAG_CHUNK_TERM: the record's BM25 analysis (its length
--     in terms and the frequency of each term), stored on chunk 0 only, so
--     keyword ranking is over records and identical on both engines.
--     TERM_COUNT NULL means "not analysed yet" (rows from before V6): the
--     indexer analyses them without re-embedding.
-- SQLite cannot change a UNIQUE constraint in place, so RAG_CHUNK is rebuilt
-- (the documented create-copy-drop-rename procedure). CHUNK_IDs are kept, so
-- the FTS5 index and the RAG_CHUNK_LOG positions stay valid; dropping the
-- old table drops its triggers, which are created again below as V2 and V5
-- defined them.

CREATE TABLE RAG_CHUNK_V6 (
  CHUNK_ID      INTEGER PRIMARY KEY AUTOINCREMENT,
  SOURCE_TYPE   TEXT    NOT NULL,
  SOURCE_ID     TEXT    NOT NULL,
  CHUNK_NO      INTEGER NOT NULL DEFAULT 0 CHECK (CHUNK_NO >= 0),
  OWNER_ID      INTEGER,
  PROJECT_ID    INTEGER,
  SPRINT_ID     INTEGER,
  FACETS        TEXT    NOT NULL DEFAULT '{}' CHECK (json_valid(FACETS) AND json_type(FACETS) = 'object'),
  CONTENT       TEXT    NOT NULL,
  EMBEDDING     BLOB    NOT NULL CHECK (length(EMBEDDING) = 1536),
  CONTENT_HASH  TEXT    NOT NULL,
  TERM_COUNT    INTEGER CHECK (TERM_COUNT IS NULL OR TERM_COUNT >= 0),
  UPDATED_AT    TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now')),
  CONSTRAINT RAG_CHUNK_SOURCE_UK UNIQUE (SOURCE_TYPE, SOURCE_ID, CHUNK_NO)
);

INSERT INTO RAG_CHUNK_V6
  (CHUNK_ID, SOURCE_TYPE, SOURCE_ID, CHUNK_NO, OWNER_ID, PROJECT_ID, SPRINT_ID, CONTENT, EMBEDDING,
   CONTENT_HASH, UPDATED_AT)
SELECT CHUNK_ID, SOURCE_TYPE, SOURCE_ID, 0, OWNER_ID, PROJECT_ID, SPRINT_ID, CONTENT, EMBEDDING,
       CONTENT_HASH, UPDATED_AT
FROM RAG_CHUNK;

-- Keep AUTOINCREMENT's high-water mark: a CHUNK_ID is never reused.
INSERT INTO sqlite_sequence (name, seq)
SELECT 'RAG_CHUNK_V6', seq FROM sqlite_sequence
WHERE name = 'RAG_CHUNK' AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'RAG_CHUNK_V6');

UPDATE sqlite_sequence
SET seq = MAX(seq, COALESCE((SELECT s.seq FROM sqlite_sequence s WHERE s.name = 'RAG_CHUNK'), 0))
WHERE name = 'RAG_CHUNK_V6';

DROP TABLE RAG_CHUNK;

ALTER TABLE RAG_CHUNK_V6 RENAME TO RAG_CHUNK;

CREATE INDEX RAG_CHUNK_OWNER_IX ON RAG_CHUNK (OWNER_ID);

CREATE INDEX RAG_CHUNK_PROJECT_IX ON RAG_CHUNK (PROJECT_ID);

-- The FTS5 triggers of V2.
CREATE TRIGGER RAG_CHUNK_FTS_AI AFTER INSERT ON RAG_CHUNK BEGIN
  INSERT INTO RAG_CHUNK_FTS (rowid, CONTENT) VALUES (new.CHUNK_ID, new.CONTENT);
END;

CREATE TRIGGER RAG_CHUNK_FTS_AD AFTER DELETE ON RAG_CHUNK BEGIN
  INSERT INTO RAG_CHUNK_FTS (RAG_CHUNK_FTS, rowid, CONTENT) VALUES ('delete', old.CHUNK_ID, old.CONTENT);
END;

CREATE TRIGGER RAG_CHUNK_FTS_AU AFTER UPDATE OF CONTENT ON RAG_CHUNK BEGIN
  INSERT INTO RAG_CHUNK_FTS (RAG_CHUNK_FTS, rowid, CONTENT) VALUES ('delete', old.CHUNK_ID, old.CONTENT);
  INSERT INTO RAG_CHUNK_FTS (rowid, CONTENT) VALUES (new.CHUNK_ID, new.CONTENT);
END;

-- The change-log triggers of V5 (the in-process indexes follow them).
CREATE TRIGGER RAG_CHUNK_LOG_AI AFTER INSERT ON RAG_CHUNK BEGIN
  INSERT INTO RAG_CHUNK_LOG (CHUNK_ID) VALUES (new.CHUNK_ID);
END;

CREATE TRIGGER RAG_CHUNK_LOG_AU AFTER UPDATE ON RAG_CHUNK BEGIN
  INSERT INTO RAG_CHUNK_LOG (CHUNK_ID) SELECT old.CHUNK_ID WHERE old.CHUNK_ID <> new.CHUNK_ID;
  INSERT INTO RAG_CHUNK_LOG (CHUNK_ID) VALUES (new.CHUNK_ID);
END;

CREATE TRIGGER RAG_CHUNK_LOG_AD AFTER DELETE ON RAG_CHUNK BEGIN
  INSERT INTO RAG_CHUNK_LOG (CHUNK_ID) VALUES (old.CHUNK_ID);
END;

-- BM25 postings of a record, on its chunk 0: one row per distinct term.
-- Written by the engine in the chunk upsert's transaction; a chunk's rows go
-- with it (ON DELETE CASCADE: the engine's connections enable foreign keys).
CREATE TABLE RAG_CHUNK_TERM (
  TERM      TEXT    NOT NULL,
  CHUNK_ID  INTEGER NOT NULL REFERENCES RAG_CHUNK (CHUNK_ID) ON DELETE CASCADE,
  TF        INTEGER NOT NULL CHECK (TF > 0),
  PRIMARY KEY (TERM, CHUNK_ID)
) WITHOUT ROWID;

CREATE INDEX RAG_CHUNK_TERM_CHUNK_IX ON RAG_CHUNK_TERM (CHUNK_ID);
