-- V8: structured answers (oracle_rag/answers) filter and count records by their facets over chunk 0 of
-- each record, within the scope. A row of RAG_CHUNK carries its 1,536-byte vector and its text, so a
-- scan of the table reads every record's vector: 100,000 records took seconds. This index holds what
-- those statements read (chunk number, type, owner, id, facets), so a count or a GROUP BY is an
-- index-only scan and a list reads the table only for the records it returns (bench/answers_scale.py).
CREATE INDEX IF NOT EXISTS RAG_CHUNK_FACETS_IX ON RAG_CHUNK (CHUNK_NO, SOURCE_TYPE, OWNER_ID, SOURCE_ID, FACETS);
