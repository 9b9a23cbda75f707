-- V14: RAG_CHUNK_GROUP, the caller's groups to chunk ids (issue 23). The
-- embedded engine keeps a table of that name, filled by triggers, because
-- SQLite re-joined RAG_CHUNK_ACL to RAG_CHUNK in every statement; here it is
-- the join itself, which the optimizer merges into the statement as before,
-- so the scope predicate has one text for both engines (engine_sql.SCOPE).
CREATE OR REPLACE VIEW RAG_CHUNK_GROUP AS
SELECT a.PRINCIPAL, c.CHUNK_ID
FROM RAG_CHUNK_ACL a
JOIN RAG_CHUNK c ON c.SOURCE_TYPE = a.SOURCE_TYPE AND c.SOURCE_ID = a.SOURCE_ID;
