"""Statements that maintain the vector index on Oracle (``oracle-rag index ...``).

* The vector index of the active model generation's slot: ``RAG_CHUNK_VEC_IX``
  on ``EMBEDDING`` (V1), or ``RAG_CHUNK_VEC_2_IX`` on ``EMBEDDING_2`` (built
  by ``oracle-rag model activate``, generation_sql). Every statement below
  that names an index exists once per slot. An IVF index computes its
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

Index names are fixed by the migrations and generation_sql; every value is a bind
(DDL takes none: its per-slot texts are fixed here).
"""

from __future__ import annotations

from oracle_rag.engines.generation_sql import VECTOR_INDEX_NAMES
from oracle_rag.engines.statements import Sql

VECTOR_INDEX = VECTOR_INDEX_NAMES[1]
"""Slot 1's vector index (V1); slot 2's is ``VECTOR_INDEX_NAMES[2]``."""

# Both slots' indexes: status lists whichever exist.
INDEX_INFO = Sql(
    oracle="""SELECT INDEX_NAME, INDEX_TYPE, INDEX_SUBTYPE, STATUS
FROM USER_INDEXES
WHERE INDEX_NAME IN ('RAG_CHUNK_VEC_IX', 'RAG_CHUNK_VEC_2_IX')"""
)


def rebuild_task(slot: int) -> str:
    """The RAG_MAINTENANCE task that records rebuilds of ``slot``'s vector index."""
    return "VECTOR_REBUILD" if slot == 1 else f"VECTOR_REBUILD_{int(slot)}"


def _named(text: str, slot: int) -> Sql:
    return Sql(oracle=text.replace("{index}", VECTOR_INDEX_NAMES[slot]))


CHUNK_COUNT = Sql(oracle="SELECT COUNT(*) FROM RAG_CHUNK")

_REBUILD_ONLINE = "ALTER INDEX {index} REBUILD ONLINE"


def rebuild_online(slot: int) -> Sql:
    return _named(_REBUILD_ONLINE, slot)


REBUILD_ONLINE = rebuild_online(1)
REBUILD_ONLINE_2 = rebuild_online(2)

# 23.26.1+: a rebuild that keeps the configured partition count (REBUILD ONLINE
# recomputes it). DDL takes no binds: the count is an integer checked by
# rebuild_with_partitions, the same way render_migration writes it into V1.
_REBUILD_WITH_PARTITIONS = "ALTER INDEX {index} REBUILD PARAMETERS (NEIGHBOR PARTITIONS {partitions})"

MAX_PARTITIONS = 10_000_000
"""NEIGHBOR PARTITIONS: > 0 and <= 10000000
(AI Vector Search User's Guide, Inverted File Flat CREATE INDEX)."""


def rebuild_with_partitions(partitions: int, slot: int = 1) -> Sql:
    """:data:`REBUILD_WITH_PARTITIONS` of ``slot``'s index for ``partitions``, an integer in
    1..MAX_PARTITIONS (ValueError otherwise)."""
    count = int(partitions)
    if not 1 <= count <= MAX_PARTITIONS or count != partitions:
        raise ValueError(f"NEIGHBOR PARTITIONS must be an integer in 1..{MAX_PARTITIONS}")
    return _named(_REBUILD_WITH_PARTITIONS.replace("{partitions}", str(count)), slot)


REBUILD_WITH_PARTITIONS_64 = rebuild_with_partitions(64)
"""The statement for ``vector_index_partitions = 64``, pinned by the golden tests and the parse check."""
REBUILD_WITH_PARTITIONS_2_64 = rebuild_with_partitions(64, 2)

# With only idx_name the package rebuilds the index from its own DDL (get_ddl): slot 2's
# index keeps the column and organization activate built it with.
_REBUILD_PACKAGE = "BEGIN DBMS_VECTOR.REBUILD_INDEX(idx_name => '{index}'); END;"


def rebuild_package(slot: int) -> Sql:
    return _named(_REBUILD_PACKAGE, slot)


REBUILD_PACKAGE = rebuild_package(1)
REBUILD_PACKAGE_2 = rebuild_package(2)

# Every step-th chunk's vector of the active generation, at most :n of them, as the
# probes of the accuracy measure ({embedding}: its column, generations.render).
ACCURACY_PROBES = Sql(
    oracle="""SELECT {embedding}
FROM RAG_CHUNK
WHERE {embedding}_GEN = :generation_id
  AND MOD(CHUNK_ID, :step) = 0
ORDER BY CHUNK_ID
FETCH FIRST :n ROWS ONLY"""
)

ACCURACY_QUERY = Sql(
    oracle="""BEGIN
  :report := DBMS_VECTOR.INDEX_ACCURACY_QUERY(
    owner_name      => USER,
    index_name      => :index_name,
    qv              => :qv,
    top_k           => :k,
    target_accuracy => :target);
END;"""
)

LAST_MAINTENANCE = Sql(oracle="SELECT DONE_AT, CHUNKS FROM RAG_MAINTENANCE WHERE TASK = :task")

RECORD_MAINTENANCE = Sql(
    oracle="""MERGE INTO RAG_MAINTENANCE t
USING (SELECT :task AS TASK FROM dual) s
ON (t.TASK = s.TASK)
WHEN MATCHED THEN UPDATE SET t.DONE_AT = SYSTIMESTAMP, t.CHUNKS = :chunks
WHEN NOT MATCHED THEN INSERT (TASK, DONE_AT, CHUNKS) VALUES (s.TASK, SYSTIMESTAMP, :chunks)"""
)
