"""Statements that maintain the vector index on Oracle (``oracle-rag index ...``).

* The vector index (``RAG_CHUNK_VEC_IX``, V1). An IVF index computes its
  centroids when it is built, and V1 builds it on an empty table, so the first
  centroids describe nothing: it must be rebuilt once data exists (and again
  when the data has grown or drifted). 26ai (server 23.26 and later):
  ``ALTER INDEX ... REBUILD ONLINE`` reorganises a global IVF index while the
  table stays writable (AI Vector Search User's Guide 26, "Rebuild IVF
  Indexes Online"). It "considers all the parameters that were used to
  create the vector index, except the NEIGHBOR PARTITIONS parameter"
  ("Inverted File Flat ALTER INDEX"), so a configured
  ``vector_index_partitions`` would be lost: from 23.26.1 ``ALTER INDEX ...
  REBUILD PARAMETERS (NEIGHBOR PARTITIONS n)`` passes it again (same page,
  "Starting with ... 23.26.1"). 23ai: ``DBMS_VECTOR.REBUILD_INDEX(idx_name)``,
  which with only the name rebuilds from the index's own DDL (AI Vector
  Search User's Guide, DBMS_VECTOR.REBUILD_INDEX); it is also the HNSW path
  and the fallback when the ALTER INDEX form is refused.
* Accuracy: ``DBMS_VECTOR.INDEX_ACCURACY_QUERY(owner_name, index_name, qv,
  top_k, target_accuracy) RETURN VARCHAR2`` compares the index's top-k for a
  query vector with the exact top-k ("Accuracy achieved (100%) is 10% higher
  than the Target Accuracy requested (90%)"). Stored chunk vectors are the
  query vectors, so the measure is about the data actually indexed.
* ``RAG_MAINTENANCE`` (V7) records when each maintenance ran and on how many
  chunks, so ``bootstrap`` knows whether the vector index was ever rebuilt
  with data in the table.

Index names are fixed by the migrations; every value is a bind.
"""

from __future__ import annotations

from .statements import Sql

VECTOR_INDEX = "RAG_CHUNK_VEC_IX"

INDEX_INFO = Sql(oracle="""SELECT INDEX_NAME, INDEX_TYPE, INDEX_SUBTYPE, STATUS
FROM USER_INDEXES
WHERE INDEX_NAME = 'RAG_CHUNK_VEC_IX'""")

CHUNK_COUNT = Sql(oracle="SELECT COUNT(*) FROM RAG_CHUNK")

REBUILD_ONLINE = Sql(oracle="ALTER INDEX RAG_CHUNK_VEC_IX REBUILD ONLINE")

# 23.26.1+: a rebuild that keeps the configured partition count (REBUILD ONLINE
# recomputes it). DDL takes no binds: the count is an integer checked by
# rebuild_with_partitions, the same way render_migration writes it into V1.
_REBUILD_WITH_PARTITIONS = "ALTER INDEX RAG_CHUNK_VEC_IX REBUILD PARAMETERS (NEIGHBOR PARTITIONS {partitions})"

MAX_PARTITIONS = 10_000_000
"""NEIGHBOR PARTITIONS: > 0 and <= 10000000 (AI Vector Search User's Guide, Inverted File Flat CREATE INDEX)."""


def rebuild_with_partitions(partitions: int) -> Sql:
    """:data:`REBUILD_WITH_PARTITIONS` for ``partitions``, an integer in 1..MAX_PARTITIONS (ValueError otherwise)."""
    count = int(partitions)
    if not 1 <= count <= MAX_PARTITIONS or count != partitions:
        raise ValueError(f"NEIGHBOR PARTITIONS must be an integer in 1..{MAX_PARTITIONS}")
    return Sql(oracle=_REBUILD_WITH_PARTITIONS.replace("{partitions}", str(count)))


REBUILD_WITH_PARTITIONS_64 = rebuild_with_partitions(64)
"""The statement for ``vector_index_partitions = 64``, pinned by the golden tests and the parse check."""

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

LAST_MAINTENANCE = Sql(oracle="SELECT DONE_AT, CHUNKS FROM RAG_MAINTENANCE WHERE TASK = :task")

RECORD_MAINTENANCE = Sql(oracle="""MERGE INTO RAG_MAINTENANCE t
USING (SELECT :task AS TASK FROM dual) s
ON (t.TASK = s.TASK)
WHEN MATCHED THEN UPDATE SET t.DONE_AT = SYSTIMESTAMP, t.CHUNKS = :chunks
WHEN NOT MATCHED THEN INSERT (TASK, DONE_AT, CHUNKS) VALUES (s.TASK, SYSTIMESTAMP, :chunks)""")
