-- V7: when index maintenance last ran, and on how many chunks (Oracle).
-- `oracle-rag index rebuild` records TASK = 'VECTOR_REBUILD' here, `oracle-rag index
-- optimize` TASK = 'TEXT_OPTIMIZE'. `oracle-rag bootstrap` reads it: V1 created the IVF
-- index on an empty table, and IVF centroids are fixed when the index is built, so the
-- first bootstrap that finds chunks (and no rebuild with chunks recorded) rebuilds it, and
-- so does one that finds the table twice as large as at the last rebuild.

CREATE TABLE RAG_MAINTENANCE (
  TASK     VARCHAR2(32 CHAR) NOT NULL,
  DONE_AT  TIMESTAMP WITH TIME ZONE NOT NULL,
  CHUNKS   NUMBER NOT NULL,
  CONSTRAINT RAG_MAINTENANCE_PK PRIMARY KEY (TASK)
);
