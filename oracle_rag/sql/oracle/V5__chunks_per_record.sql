-- V5: several chunks per record, facets, and what BM25 needs (Oracle).
-- (a) A record (SOURCE_TYPE, SOURCE_ID) whose text exceeds the model window
--     becomes chunks CHUNK_NO = 0, 1, ... sharing the record's scope columns
--     and facets: the unique key becomes (SOURCE_TYPE, SOURCE_ID, CHUNK_NO).
-- (b) FACETS: native JSON, constrained to an object, of the record's facet
--     values, the same on every chunk of the record (NULL reads as {}).
-- (c) TERM_COUNT and RAG_CHUNK_TERM: the record's BM25 analysis (its length
--     in terms and the frequency of each term), stored on chunk 0 only, so
--     keyword ranking is over records and identical on both engines.
--     TERM_COUNT NULL means "not analysed yet" (rows from before V5): the
--     indexer analyses them without re-embedding.
-- Each statement commits on its own; a re-run resumes at the first one that
-- did not complete (see migrations.py).

ALTER TABLE RAG_CHUNK ADD (
  CHUNK_NO    NUMBER(6) DEFAULT 0 NOT NULL CONSTRAINT RAG_CHUNK_CHUNK_NO_CK CHECK (CHUNK_NO >= 0),
  FACETS      JSON (OBJECT),
  TERM_COUNT  NUMBER(10) CONSTRAINT RAG_CHUNK_TERM_COUNT_CK CHECK (TERM_COUNT >= 0)
);

-- The constraint created its index (V1), so dropping it drops the index too
-- and the name is free for the new key.
ALTER TABLE RAG_CHUNK DROP CONSTRAINT RAG_CHUNK_SOURCE_UK;

ALTER TABLE RAG_CHUNK ADD CONSTRAINT RAG_CHUNK_SOURCE_UK UNIQUE (SOURCE_TYPE, SOURCE_ID, CHUNK_NO);

-- BM25 postings of a record, on its chunk 0: one row per distinct term; the
-- primary key (TERM, CHUNK_ID) makes a query term's postings one range scan.
-- A chunk's rows go with it (ON DELETE CASCADE).
CREATE TABLE RAG_CHUNK_TERM (
  TERM      VARCHAR2(100 CHAR) NOT NULL,
  CHUNK_ID  NUMBER NOT NULL,
  TF        NUMBER(10) NOT NULL,
  CONSTRAINT RAG_CHUNK_TERM_PK PRIMARY KEY (TERM, CHUNK_ID),
  CONSTRAINT RAG_CHUNK_TERM_CHUNK_FK FOREIGN KEY (CHUNK_ID) REFERENCES RAG_CHUNK (CHUNK_ID) ON DELETE CASCADE,
  CONSTRAINT RAG_CHUNK_TERM_TF_CK CHECK (TF > 0)
);

CREATE INDEX RAG_CHUNK_TERM_CHUNK_IX ON RAG_CHUNK_TERM (CHUNK_ID);
