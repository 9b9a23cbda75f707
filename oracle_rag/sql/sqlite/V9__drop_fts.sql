-- V9: drop the FTS5 table of V2 and its triggers (re-created by V6). Keyword search is BM25 over
-- RAG_CHUNK_TERM (bm25.py, engines/term_index.py): no statement reads RAG_CHUNK_FTS any more,
-- while every chunk write still paid for its triggers. The same change on Oracle drops the
-- Oracle Text index (V9 there).

DROP TRIGGER IF EXISTS RAG_CHUNK_FTS_AI;

DROP TRIGGER IF EXISTS RAG_CHUNK_FTS_AD;

DROP TRIGGER IF EXISTS RAG_CHUNK_FTS_AU;

DROP TABLE IF EXISTS RAG_CHUNK_FTS;
