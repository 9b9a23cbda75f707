-- V5: change log of RAG_CHUNK for the in-process vector cache (embedded engine only).
-- Every process that searches keeps the embeddings in memory
-- (oracle_rag/engines/vector_cache.py); before a search it reads the log rows
-- after its position (a primary-key range) and re-reads those chunks. The
-- triggers write the log in the same transaction as the chunk write, so a log
-- row commits or rolls back with it. AUTOINCREMENT: a SEQ is never reused, so
-- a position is never ambiguous. Old rows are pruned by the engine's write
-- path (a prefix, SEQ below MAX(SEQ) - N); a process whose position is older
-- than the oldest row left reloads everything. Oracle has no such cache and
-- no V5.

CREATE TABLE RAG_CHUNK_LOG (
  SEQ       INTEGER PRIMARY KEY AUTOINCREMENT,
  CHUNK_ID  INTEGER NOT NULL
);

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
