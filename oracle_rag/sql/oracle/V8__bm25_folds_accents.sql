-- V8: the BM25 analyser folds accents (bm25.fold: NFKD, combining marks
-- removed), so every record's stored analysis is out of date. Drop the
-- postings and mark every record "not analysed" (TERM_COUNT NULL); the step
-- that runs after the migrations (Engine.analyse_pending, run by `oracle-rag
-- migrate` and `bootstrap`) re-analyses them from their stored chunks, with
-- no embedding. Until it has run, keyword search skips the records.
-- TRUNCATE: RAG_CHUNK_TERM is only the child of its foreign key, so it may be truncated.
TRUNCATE TABLE RAG_CHUNK_TERM;

UPDATE RAG_CHUNK SET TERM_COUNT = NULL WHERE TERM_COUNT IS NOT NULL;
