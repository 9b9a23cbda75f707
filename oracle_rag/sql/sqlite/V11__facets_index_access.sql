-- V11: the facets index of V8 again, with the access columns the scope predicate reads since V10
-- (ACCESS_PUBLIC, ACCESS_OWNER), so a count or a GROUP BY over the facets of the records a caller may
-- see stays an index-only scan (bench/answers_scale.py).
DROP INDEX IF EXISTS RAG_CHUNK_FACETS_IX;

CREATE INDEX RAG_CHUNK_FACETS_IX ON RAG_CHUNK (CHUNK_NO, SOURCE_TYPE, ACCESS_PUBLIC, ACCESS_OWNER, SOURCE_ID, FACETS);
