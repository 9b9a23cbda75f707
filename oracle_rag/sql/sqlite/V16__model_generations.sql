-- V16: model generations (engines/generations.py, docs/embedding.md).
-- Every stored vector belongs to a generation: RAG_MODEL_GENERATION names the
-- model (its catalog name, the name the database runs it under, its file's
-- fingerprint, its query/passage prefixes) and the vector slot it owns.
-- RAG_CHUNK gets a second slot (EMBEDDING_2) and a stamp per slot
-- (EMBEDDING_GEN, EMBEDDING_2_GEN: the generation that wrote the vector), so a
-- switch fills the new model's vectors beside the ones searches read, and a
-- vector left in a reused slot by a dropped generation is never taken for the
-- new one's. One generation per slot, one model once, exactly one ACTIVE.
-- The existing vectors are generation 1: all-MiniLM-L6-v2 in slot 1.

CREATE TABLE RAG_MODEL_GENERATION (
  GENERATION_ID   INTEGER PRIMARY KEY AUTOINCREMENT,
  MODEL_NAME      TEXT    NOT NULL,
  DB_MODEL        TEXT    NOT NULL,
  FINGERPRINT     TEXT,
  DIMENSIONS      INTEGER NOT NULL,
  SLOT            INTEGER NOT NULL CHECK (SLOT IN (1, 2)),
  STATE           TEXT    NOT NULL CHECK (STATE IN ('LOADING', 'STANDBY', 'ACTIVE')),
  QUERY_PREFIX    TEXT,
  PASSAGE_PREFIX  TEXT,
  CREATED_AT      TEXT    NOT NULL,
  ACTIVATED_AT    TEXT,
  CONSTRAINT RAG_MODEL_GENERATION_SLOT_UK UNIQUE (SLOT),
  CONSTRAINT RAG_MODEL_GENERATION_MODEL_UK UNIQUE (MODEL_NAME)
);

CREATE UNIQUE INDEX RAG_MODEL_GENERATION_ACTIVE_UK ON RAG_MODEL_GENERATION (STATE) WHERE STATE = 'ACTIVE';

INSERT INTO RAG_MODEL_GENERATION (GENERATION_ID, MODEL_NAME, DB_MODEL, DIMENSIONS, SLOT, STATE, CREATED_AT, ACTIVATED_AT)
VALUES (1, 'all-MiniLM-L6-v2', 'ALL_MINILM_L12_V2', 384, 1, 'ACTIVE',
        strftime('%Y-%m-%dT%H:%M:%f', 'now'), strftime('%Y-%m-%dT%H:%M:%f', 'now'));

ALTER TABLE RAG_CHUNK ADD COLUMN EMBEDDING_GEN INTEGER;

ALTER TABLE RAG_CHUNK ADD COLUMN EMBEDDING_2 BLOB CHECK (EMBEDDING_2 IS NULL OR length(EMBEDDING_2) = 1536);

ALTER TABLE RAG_CHUNK ADD COLUMN EMBEDDING_2_GEN INTEGER;

UPDATE RAG_CHUNK SET EMBEDDING_GEN = 1;
