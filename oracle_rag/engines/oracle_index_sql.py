"""Statements that maintain the two search indexes on Oracle (``oracle-rag index ...``).

* The vector index (``RAG_CHUNK_VEC_IX``, V1). An IVF index computes its
  centroids when it is built, and V1 builds it on an empty table, so the first
  centroids describe nothing: it must be rebuilt once data exists (and again
  when the data has grown or drifted). 26ai (server 23.26 and later):
  ``ALTER INDEX ... REBUILD ONLINE`` reorganises a global IVF index while the
  table stays writable (AI Vector Search User's Guide 26, "Rebuild IVF
  Indexes Online"; 23.26.1 also accepts new parameters, which we do not
  pass). 23ai: ``DBMS_VECTOR.REBUILD_INDEX(idx_name)``, which with only the
  name rebuilds from the index's own DDL (PL/SQL Packages and Types
  Reference, DBMS_VECTOR.REBUILD_INDEX); it is also the HNSW path.
* Accuracy: ``DBMS_VECTOR.INDEX_ACCURACY_QUERY(owner_name, index_name, qv,
  top_k, target_accuracy) RETURN VARCHAR2`` compares the index's top-k for a
  query vector with the exact top-k ("Accuracy achieved (100%) is 10% higher
  than the Target Accuracy requested (90%)"). Stored chunk vectors are the
  query vectors, so the measure is about the data actually indexed.
* The Oracle Text index: ``SYNC (ON COMMIT)`` syncs on every worker commit,
  which fragments a CONTEXT index (Text Application Developer's Guide,
  "Optimizing the Index"); ``CTX_DDL.OPTIMIZE_INDEX(..., 'FULL', maxtime)``
  compacts it and removes deleted rows.
* ``RAG_MAINTENANCE`` (V7) records when each maintenance ran and on how many
  chunks, so ``bootstrap`` knows whether the vector index was ever rebuilt
  with data in the table.

Index names are fixed by the migrations; every value is a bind.
"""

from __future__ import annotations

from .statements import Sql

VECTOR_INDEX = "RAG_CHUNK_VEC_IX"
TEXT_INDEX = "RAG_CHUNK_TEXT_IX"

INDEX_INFO = Sql(oracle="""SELECT INDEX_NAME, INDEX_TYPE, INDEX_SUBTYPE, STATUS
FROM USER_INDEXES
WHERE INDEX_NAME IN ('RAG_CHUNK_VEC_IX', 'RAG_CHUNK_TEXT_IX')
ORDER BY INDEX_NAME""")

CHUNK_COUNT = Sql(oracle="SELECT COUNT(*) FROM RAG_CHUNK")

REBUILD_ONLINE = Sql(oracle="ALTER INDEX RAG_CHUNK_VEC_IX REBUILD ONLINE")

REBUILD_PACKAGE = Sql(oracle="BEGIN DBMS_VECTOR.REBUILD_INDEX(idx_name => 'RAG_CHUNK_VEC_IX'); END;")

# Every step-th chunk's vector, at most :n of them, as the probes of the accuracy measure.
ACCURACY_PROBES = Sql(oracle="""SELECT EMBEDDING
FROM RAG_CHUNK
WHERE MOD(CHUNK_ID, :step) = 0
ORDER BY CHUNK_ID
FETCH FIRST :n ROWS ONLY""")

ACCURACY_QUERY = Sql(oracle="""BEGIN
  :report := DBMS_VECTOR.INDEX_ACCURACY_QUERY(
    owner_name      => USER,
    index_name      => 'RAG_CHUNK_VEC_IX',
    qv              => :qv,
    top_k           => :k,
    target_accuracy => :target);
END;""")

TEXT_OPTIMIZE = Sql(oracle="""BEGIN
  CTX_DDL.OPTIMIZE_INDEX(idx_name => 'RAG_CHUNK_TEXT_IX', optlevel => 'FULL', maxtime => :maxtime);
END;""")

LAST_MAINTENANCE = Sql(oracle="SELECT DONE_AT, CHUNKS FROM RAG_MAINTENANCE WHERE TASK = :task")

RECORD_MAINTENANCE = Sql(oracle="""MERGE INTO RAG_MAINTENANCE t
USING (SELECT :task AS TASK FROM dual) s
ON (t.TASK = s.TASK)
WHEN MATCHED THEN UPDATE SET t.DONE_AT = SYSTIMESTAMP, t.CHUNKS = :chunks
WHEN NOT MATCHED THEN INSERT (TASK, DONE_AT, CHUNKS) VALUES (s.TASK, SYSTIMESTAMP, :chunks)""")
