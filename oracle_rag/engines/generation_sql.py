"""Statements of model generations (engines/generations.py): the registry, coverage, the fill, the flip.

``{embedding}`` is a generation's vector column (its stamp is
``{embedding}_GEN``) and ``{model}`` the model that embeds for it; both are
filled from one generation by ``generations.render``. The chunk upsert's
vector values are ``{vector_1}`` / ``{vector_2}``, one per slot, filled with
one of the fragments below (:func:`upsert_text`).
"""

from __future__ import annotations

from oracle_rag.engines.statements import Sql

_COLUMNS = (
    "GENERATION_ID, MODEL_NAME, DB_MODEL, FINGERPRINT, DIMENSIONS, SLOT, STATE, QUERY_PREFIX, "
    "PASSAGE_PREFIX, CREATED_AT, ACTIVATED_AT"
)

GENERATIONS = Sql.both(f"SELECT {_COLUMNS} FROM RAG_MODEL_GENERATION ORDER BY GENERATION_ID")

# The one generation searches read, looked up by every search in its own
# transaction: a flip committed by another process is seen by the next search.
ACTIVE_GENERATION = Sql.both(f"SELECT {_COLUMNS} FROM RAG_MODEL_GENERATION WHERE STATE = 'ACTIVE'")

INSERT_GENERATION = Sql(
    oracle="""INSERT INTO RAG_MODEL_GENERATION
  (MODEL_NAME, DB_MODEL, DIMENSIONS, SLOT, STATE, QUERY_PREFIX, PASSAGE_PREFIX, CREATED_AT)
VALUES (:model_name, :db_model, :dimensions, :slot, 'LOADING', :query_prefix, :passage_prefix, SYSTIMESTAMP)""",
    sqlite="""INSERT INTO RAG_MODEL_GENERATION
  (MODEL_NAME, DB_MODEL, DIMENSIONS, SLOT, STATE, QUERY_PREFIX, PASSAGE_PREFIX, CREATED_AT)
VALUES (:model_name, :db_model, :dimensions, :slot, 'LOADING', :query_prefix, :passage_prefix,
        strftime('%Y-%m-%dT%H:%M:%f', 'now'))""",
)

# LOADING -> STANDBY once the model embeds: from this commit every chunk write
# embeds it too and the worker fills the rest.
MARK_LOADED = Sql.both("""UPDATE RAG_MODEL_GENERATION SET STATE = 'STANDBY', FINGERPRINT = :fingerprint
WHERE GENERATION_ID = :generation_id AND STATE = 'LOADING'""")

# The flip, two statements in one transaction (SQLite checks the one-ACTIVE
# unique index row by row): the active one steps down, the new one steps up.
MARK_STANDBY = Sql.both("""UPDATE RAG_MODEL_GENERATION SET STATE = 'STANDBY'
WHERE GENERATION_ID = :generation_id AND STATE = 'ACTIVE'""")
MARK_ACTIVE = Sql(
    oracle="""UPDATE RAG_MODEL_GENERATION SET STATE = 'ACTIVE', ACTIVATED_AT = SYSTIMESTAMP
WHERE GENERATION_ID = :generation_id AND STATE = 'STANDBY'""",
    sqlite="""UPDATE RAG_MODEL_GENERATION SET STATE = 'ACTIVE', ACTIVATED_AT = strftime('%Y-%m-%dT%H:%M:%f', 'now')
WHERE GENERATION_ID = :generation_id AND STATE = 'STANDBY'""",
)

DELETE_GENERATION = Sql.both("""DELETE FROM RAG_MODEL_GENERATION
WHERE GENERATION_ID = :generation_id AND STATE <> 'ACTIVE'""")

# Chunks without a vector of this generation (none yet, or one of the slot's
# previous owner): what the fill still has to do, and what refuses a flip.
MISSING = Sql.both("""SELECT COUNT(*) FROM RAG_CHUNK
WHERE {embedding}_GEN IS NULL OR {embedding}_GEN <> :generation_id""")

CHUNK_TOTAL = Sql.both("SELECT COUNT(*) AS CHUNKS FROM RAG_CHUNK")

# The fill's next chunks. Oracle locks them as they are fetched (SKIP LOCKED,
# fetch size pinned to the batch like the queue pick): two workers fill
# different chunks, and an edit of a locked chunk waits for the fill's commit.
FILL_PICK = Sql(
    oracle="""SELECT CHUNK_ID, CONTENT FROM RAG_CHUNK
WHERE {embedding}_GEN IS NULL OR {embedding}_GEN <> :generation_id
FOR UPDATE SKIP LOCKED""",
    sqlite="""SELECT CHUNK_ID, CONTENT FROM RAG_CHUNK
WHERE {embedding}_GEN IS NULL OR {embedding}_GEN <> :generation_id
ORDER BY CHUNK_ID
LIMIT :limit""",
)

# One filled chunk. Written only if the chunk still has the text it was
# embedded from (an edit meanwhile wrote both generations itself), still
# lacks this generation's vector (nothing is written twice), and the
# generation is still there (a drop meanwhile).
STORE_FILLED = Sql(
    oracle="""UPDATE RAG_CHUNK
SET {embedding} = VECTOR_EMBEDDING({model} USING :embed_text AS data), {embedding}_GEN = :generation_id
WHERE CHUNK_ID = :chunk_id
  AND ({embedding}_GEN IS NULL OR {embedding}_GEN <> :generation_id)
  AND EXISTS (SELECT 1 FROM RAG_MODEL_GENERATION g
              WHERE g.GENERATION_ID = :generation_id AND g.STATE IN ('STANDBY', 'ACTIVE'))""",
    sqlite="""UPDATE RAG_CHUNK
SET {embedding} = :embedding, {embedding}_GEN = :generation_id
WHERE CHUNK_ID = :chunk_id
  AND CONTENT = :content
  AND ({embedding}_GEN IS NULL OR {embedding}_GEN <> :generation_id)
  AND EXISTS (SELECT 1 FROM RAG_MODEL_GENERATION g
              WHERE g.GENERATION_ID = :generation_id AND g.STATE IN ('STANDBY', 'ACTIVE'))""",
)

# Oracle: one vector index per slot, built before the flip (IVF centroids from
# the filled column); V1 made slot 1's. {organization} and {accuracy} come
# from configuration like V1's (OracleEngine.render_migration's checks). Built
# only when USER_INDEXES lacks it, so a build killed half way is run again.
VECTOR_INDEX_NAMES = {1: "RAG_CHUNK_VEC_IX", 2: "RAG_CHUNK_VEC_2_IX"}
VECTOR_INDEX_EXISTS = Sql(oracle="SELECT COUNT(*) FROM USER_INDEXES WHERE INDEX_NAME = :index_name")
_CREATE_VECTOR_INDEX = """CREATE VECTOR INDEX {index} ON RAG_CHUNK ({embedding})
  ORGANIZATION {organization}
  DISTANCE COSINE
  WITH TARGET ACCURACY {accuracy}"""


def create_vector_index(slot: int, organization: str, accuracy: int) -> Sql:
    """The vector index of ``slot``'s column; ``organization`` one of the two fixed clauses."""
    if (
        organization not in ("NEIGHBOR PARTITIONS", "INMEMORY NEIGHBOR GRAPH")
        or not 1 <= int(accuracy) <= 100
    ):
        raise ValueError("vector index organization or accuracy out of range")
    return Sql(
        oracle=_CREATE_VECTOR_INDEX.replace("{index}", VECTOR_INDEX_NAMES[slot])
        .replace("{embedding}", "EMBEDDING" if slot == 1 else "EMBEDDING_2")
        .replace("{organization}", organization)
        .replace("{accuracy}", str(int(accuracy)))
    )


def drop_vector_index(slot: int) -> Sql:
    return Sql(oracle=f"DROP INDEX IF EXISTS {VECTOR_INDEX_NAMES[slot]}")


VECTOR_INDEX_FORMS = {
    "CREATE_VECTOR_INDEX_2_IVF_90": create_vector_index(2, "NEIGHBOR PARTITIONS", 90),
    "DROP_VECTOR_INDEX_2": drop_vector_index(2),
}

# -- the chunk upsert's vector per slot -------------------------------------------
# Oracle embeds in the statement; the embedded engine binds a vector computed
# before its write transaction (indexing/worker.py), or embeds in the statement too.
# A slot no live generation owns gets no vector (its stamp NULL): Oracle NULL;
# SQLite's EMBEDDING is NOT NULL since V1, so slot 1 keeps a zero blob there.
EMBED_VALUE = {
    "oracle": "VECTOR_EMBEDDING({model} USING :embed_text_{slot} AS data)",
    "sqlite": "vector_embedding({model}, :embed_text_{slot})",
}
BOUND_VALUE = ":embedding_{slot}"
BLANK = {"oracle": {1: "NULL", 2: "NULL"}, "sqlite": {1: "zeroblob(1536)", 2: "NULL"}}
