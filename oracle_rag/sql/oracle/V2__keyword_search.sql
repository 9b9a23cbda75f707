-- V2: keyword search with Oracle Text over RAG_CHUNK.CONTENT.
-- SYNC (ON COMMIT) makes a committed chunk searchable by keyword without a
-- separate CTX_DDL.SYNC_INDEX job. Needs Oracle Text (not in -slim images)
-- and the CTXAPP role.

CREATE INDEX RAG_CHUNK_TEXT_IX ON RAG_CHUNK (CONTENT)
  INDEXTYPE IS CTXSYS.CONTEXT
  PARAMETERS ('SYNC (ON COMMIT)');
