"""Search latency of the embedded engine at 10k and 100k chunks, against numpy.

For each size the script fills a scratch database with synthetic chunks
(normalised random float32 vectors written directly as blobs into RAG_CHUNK,
random text from a Zipf-distributed vocabulary so FTS5 has real postings;
the FTS triggers index it), then measures p50/p95 milliseconds per query:

* ``semantic`` / ``keyword`` / ``hybrid`` through ``Retriever.search`` as the
  product runs them: the query embedded inside SQL ("including embedding");
* ``semantic`` and ``hybrid`` with a precomputed query vector ("excluding
  embedding"): ``SqliteEngine.semantic_search_by_vector``, the product's
  cached path (in-process vector index, candidates re-checked in SQL) minus
  the query embedding;
* the SQL scan the cache replaced (``semantic_scan_*``): including embedding
  through a second RagSystem on the same file with
  ``embedded_vector_cache=False``, excluding embedding as a bench-local copy
  of the product's scan statement with ``vector_embedding(:query)`` replaced
  by ``:qvec`` (derived from the product text, so a change there shows up);
* the cache's first full load (seconds) and its size (MB);
* numpy brute-force exact search (``X @ q`` + argpartition) over the same
  vectors in the same process, and the ratio of the SQL scan to it;
* recall@8 of the SQL top-8 against numpy's exact top-8 (manager: all rows;
  developer: numpy restricted to the rows the scope lets them see);
* unless ``--no-alternatives``: the same exact KNN through other layouts, to
  put numbers on the options (the product statement on a connection with
  ``PRAGMA mmap_size`` = 1 GiB; a sqlite-vec ``vec0`` virtual table with the
  scope as a metadata column, cosine and L2; the scalar scan with L2; a
  narrow copy of the table without CONTENT; an in-process numpy matrix with
  the scope as masks). Experiments in this file only: the product's SQL is
  unchanged.

All variants run interleaved per query (see :func:`interleaved`), because
the machine is shared and its load drifts; ratios are more trustworthy than
absolute milliseconds.

Callers: a manager (sees every row: the like-for-like comparison with numpy)
and a developer (scope predicate narrows the candidates in SQL).

Run: ``.venv/bin/python bench/retrieval_latency.py`` (about 3-5 minutes on
2 cores). Writes ``bench/results/retrieval_latency.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# numpy's matrix-vector product on one thread, as each SQLite query runs on
# one thread: the like-for-like baseline, and far steadier on a shared
# machine (at 100k rows the product is memory-bound either way).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "retrieval_latency.json"
sys.path.insert(0, str(ROOT))

from oracle_rag.callers.caller import Caller  # noqa: E402
from oracle_rag.config import Settings, load_settings  # noqa: E402
from oracle_rag.engines import Filters, Hit, engine_sql  # noqa: E402
from oracle_rag.engines.generations import INITIAL, render  # noqa: E402
from oracle_rag.engines.records import hits, search_binds  # noqa: E402
from oracle_rag.engines.statements import stmt  # noqa: E402
from oracle_rag.text.bm25 import analyze_record  # noqa: E402

# As the engine sends it for the generation of a fresh database (MiniLM in slot 1).
_PRODUCT_SEMANTIC = render(engine_sql.SEMANTIC_SEARCH.sqlite or "", INITIAL, "sqlite")
from oracle_rag.search.fusion import rrf  # noqa: E402
from oracle_rag.search.hybrid import SemanticLeg, hybrid, semantic_leg_filters  # noqa: E402
from oracle_rag.system import RagSystem  # noqa: E402

DIM = 384
K = 8
MANAGER = Caller(3, "manager", name="bench manager")
DEVELOPER = Caller(9, "developer", name="bench developer")
DEVELOPERS = list(range(9, 41))

# -- bench-local statements ------------------------------------------------------
_CTE = "WITH q AS (SELECT vector_embedding('all-MiniLM-L6-v2', :query) AS v)\n"
_EMBEDDED_VECTOR = "(SELECT v FROM q)"
if _CTE not in _PRODUCT_SEMANTIC or _EMBEDDED_VECTOR not in _PRODUCT_SEMANTIC:
    raise SystemExit("the product's SEMANTIC_SEARCH changed shape; update bench/retrieval_latency.py")
# The product statement with the query vector bound instead of embedded.
SEMANTIC_BY_VECTOR = _PRODUCT_SEMANTIC.replace(_CTE, "").replace(_EMBEDDED_VECTOR, ":qvec")

# The access columns as the reference sources' policy writes them (sources/access.py): a task
# is its assignee's, sprints and projects are public; an unassigned task is managers' only.
INSERT_CHUNK = """INSERT INTO RAG_CHUNK
  (SOURCE_TYPE, SOURCE_ID, OWNER_ID, PROJECT_ID, SPRINT_ID, CONTENT, EMBEDDING, EMBEDDING_GEN, CONTENT_HASH,
   TERM_COUNT, ACCESS_OWNER, ACCESS_PUBLIC)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, 1, ?8, ?9, ?3, CASE WHEN ?3 IS NULL AND ?1 <> 'TASK' THEN 1 ELSE 0 END)"""
# Each record's BM25 postings, as the indexer writes them (bm25.analyze_record); the
# scratch file is fresh, so the i-th row's CHUNK_ID is i + 1.
# (TERM, CHUNK_ID, TF) rows; each posting carries its record's columns (engine_sql.POSTING_COLUMNS).
INSERT_TERM = (
    f"INSERT INTO RAG_CHUNK_TERM (TERM, TF, {', '.join(engine_sql.POSTING_COLUMNS)}) "
    f"SELECT ?1, ?3, {', '.join(engine_sql.POSTING_COLUMNS)} FROM RAG_CHUNK WHERE CHUNK_ID = ?2"
)

# vec0 experiment: SCOPE_OWNER = the owner for owned rows, 0 for rows every
# caller sees (no owner, not a task), -1 for unowned tasks (managers only).
VEC0_DDL = """CREATE VIRTUAL TABLE RAG_CHUNK_VEC USING vec0(
  CHUNK_ID INTEGER PRIMARY KEY,
  EMBEDDING FLOAT[384] distance_metric=cosine,
  SCOPE_OWNER INTEGER,
  PROJECT_ID INTEGER,
  SOURCE_TYPE TEXT
)"""
VEC0_FILL = """INSERT INTO RAG_CHUNK_VEC (CHUNK_ID, EMBEDDING, SCOPE_OWNER, PROJECT_ID, SOURCE_TYPE)
SELECT CHUNK_ID, EMBEDDING,
       CASE WHEN OWNER_ID IS NOT NULL THEN OWNER_ID WHEN SOURCE_TYPE <> 'TASK' THEN 0 ELSE -1 END,
       PROJECT_ID, SOURCE_TYPE
FROM RAG_CHUNK"""
VEC0_KNN_ALL = """SELECT v.CHUNK_ID, v.distance
FROM RAG_CHUNK_VEC v
WHERE v.EMBEDDING MATCH :qvec AND k = :k
ORDER BY v.distance"""
# What the product would need: the KNN plus the chunk columns.
VEC0_KNN_JOINED = """WITH knn AS (
  SELECT v.CHUNK_ID, v.distance FROM RAG_CHUNK_VEC v
  WHERE v.EMBEDDING MATCH :qvec AND k = :k AND v.SCOPE_OWNER IN (0, :caller_id)
)
SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT, knn.distance AS SCORE,
       c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID
FROM knn JOIN RAG_CHUNK c ON c.CHUNK_ID = knn.CHUNK_ID
ORDER BY knn.distance, c.CHUNK_ID"""
# The product statement without the source-type list (a plain DBAPI connection
# has no expanding binds); with no type filter the two are the same plan.
SEMANTIC_BY_VECTOR_NO_TYPES = SEMANTIC_BY_VECTOR.replace(
    " \nAND (:f_all_types = 1 OR c.SOURCE_TYPE IN :f_types)", ""
)
SEMANTIC_BY_VECTOR_NO_TYPES = SEMANTIC_BY_VECTOR_NO_TYPES.replace(
    " AND (:f_all_types = 1 OR c.SOURCE_TYPE IN :f_types)", ""
)
assert "f_types" not in SEMANTIC_BY_VECTOR_NO_TYPES
# The product statement with L2 instead of cosine (same order for unit vectors).
SCALAR_L2 = SEMANTIC_BY_VECTOR.replace("vec_distance_cosine(", "vec_distance_l2(").replace(
    f"\n  AND {engine_sql.FILTERS}", ""
)
assert "f_types" not in SCALAR_L2 and "vec_distance_l2(" in SCALAR_L2
# A narrow copy without CONTENT, so the scan reads 1.5 KB per row and no text;
# CONTENT is joined for the k winners only.
NARROW_DDL = """CREATE TABLE RAG_CHUNK_NARROW AS
SELECT CHUNK_ID, OWNER_ID, SOURCE_TYPE, PROJECT_ID, SPRINT_ID, EMBEDDING FROM RAG_CHUNK"""
NARROW_KNN = """WITH top AS (
  SELECT n.CHUNK_ID, vec_distance_cosine(n.EMBEDDING, :qvec) AS SCORE
  FROM RAG_CHUNK_NARROW n
  WHERE (:see_all = 1 OR n.OWNER_ID = :caller_id OR (n.OWNER_ID IS NULL AND n.SOURCE_TYPE <> 'TASK'))
  ORDER BY SCORE, n.CHUNK_ID
  LIMIT :k
)
SELECT c.CHUNK_ID, c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT, top.SCORE, c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID
FROM top JOIN RAG_CHUNK c ON c.CHUNK_ID = top.CHUNK_ID
ORDER BY top.SCORE, c.CHUNK_ID"""
FETCH_BY_IDS = (
    "SELECT CHUNK_ID, SOURCE_TYPE, SOURCE_ID, CONTENT, OWNER_ID, PROJECT_ID, SPRINT_ID "
    "FROM RAG_CHUNK WHERE CHUNK_ID IN ({marks})"
)


# -- data ---------------------------------------------------------------------------
def vocabulary(rng: np.random.Generator, size: int = 3000) -> list[str]:
    """Pronounceable pseudo-words plus some real ones, so queries can mix both."""
    real = (
        "invoice payment login timeout mobile sync kubernetes search export report dashboard "
        "latency cache retry deploy alert backup audit error checkout token session queue worker "
        "database index migration release sprint project customer password email upload"
    ).split()
    cons, vows = list("bcdfghjklmnprstvz"), list("aeiou")
    words = set(real)
    while len(words) < size:
        n = int(rng.integers(2, 5))
        words.add("".join(str(rng.choice(cons)) + str(rng.choice(vows)) for _ in range(n)))
    return sorted(words)


def zipf_ids(rng: np.random.Generator, vocab: int, count: int) -> np.ndarray:
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    p = 1.0 / ranks
    return rng.choice(vocab, size=count, p=p / p.sum())


def synthetic_rows(
    n: int, rng: np.random.Generator, words: list[str]
) -> tuple[np.ndarray, list[tuple[Any, ...]]]:
    vectors = rng.standard_normal((n, DIM), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    token_ids = zipf_ids(rng, len(words), n * 24).reshape(n, 24)
    kinds = rng.random(n)
    rows = []
    for i in range(n):
        if kinds[i] < 0.85:
            source_type = "TASK"
            owner = None if kinds[i] < 0.05 else int(DEVELOPERS[i % len(DEVELOPERS)])
        else:
            source_type, owner = ("SPRINT" if kinds[i] < 0.95 else "PROJECT"), None
        text = " ".join(words[t] for t in token_ids[i])
        rows.append(
            (
                source_type,
                str(i + 1),
                owner,
                int(i % 6) + 1,
                int(i % 48) + 1,
                text,
                vectors[i].astype("<f4").tobytes(),
                f"{i:064x}",
                analyze_record(text).length,
            )
        )
    return vectors, rows


def term_rows(rows: list[tuple[Any, ...]]) -> list[tuple[str, int, int]]:
    return [(term, i + 1, tf) for i, r in enumerate(rows) for term, tf in analyze_record(r[5]).terms]


def visible(rows: list[tuple[Any, ...]], caller: Caller) -> np.ndarray:
    """Row indexes the caller may see, computed in Python from the scope rule."""
    if caller.sees_all:
        return np.arange(len(rows))
    return np.array(
        [i for i, r in enumerate(rows) if r[2] == caller.employee_id or (r[2] is None and r[0] != "TASK")]
    )


# -- timing -------------------------------------------------------------------------
def interleaved(
    variants: dict[str, Callable[[int], Any]],
    count: int,
    rounds: int,
    cpu: dict[str, list[float]] | None = None,
) -> tuple[dict[str, list[float]], dict[str, list[Any]]]:
    """Time every variant on every query, interleaved.

    The machine is shared, so its load drifts during a run; running the
    variants back to back per query (in a rotating order) exposes them all
    to the same load, which keeps the ratios meaningful even when absolute
    numbers move. Each variant runs once as a warm-up (statement cache, page
    cache, model session) before timing. ``rounds`` passes over the queries.
    ``cpu`` (if given) receives each run's CPU time of this thread, which a
    loaded machine does not inflate: at a load average of 10 on 2 cores a
    run is descheduled often, and the longer the run the more (so the p50
    of a sum of steps exceeds the sum of their p50s). Every step of a search
    runs on the calling thread (SQLite, and numpy with one BLAS thread).
    """
    for fn in variants.values():
        fn(0)
    names = list(variants)
    times: dict[str, list[float]] = {n: [] for n in names}
    outputs: dict[str, list[Any]] = {n: [] for n in names}
    step = 0
    for r in range(rounds):
        for i in range(count):
            step += 1
            for name in names[step % len(names) :] + names[: step % len(names)]:
                start, start_cpu = time.perf_counter(), time.thread_time()
                result = variants[name](i)
                times[name].append((time.perf_counter() - start) * 1000)
                if cpu is not None:
                    cpu.setdefault(name, []).append((time.thread_time() - start_cpu) * 1000)
                if r == 0:
                    outputs[name].append(result)
    return times, outputs


def summary(times: list[float]) -> dict[str, float]:
    p50, p95 = np.percentile(times, [50, 95])
    return {"p50_ms": round(float(p50), 3), "p95_ms": round(float(p95), 3)}


def numpy_top(matrix: np.ndarray, q: np.ndarray, k: int) -> np.ndarray:
    scores = matrix @ q
    part = np.argpartition(-scores, k)[:k]
    return part[np.argsort(-scores[part], kind="stable")]


def recall(found: list[list[int]], truth: list[list[int]]) -> float:
    return float(np.mean([len(set(f) & set(t)) / len(t) for f, t in zip(found, truth, strict=True)]))


def ids_of(result: Any) -> list[int]:
    """CHUNK_IDs from whatever a variant returns (Hits, RetrievedChunks, rows, numpy ids)."""
    out = []
    for item in result:
        if hasattr(item, "chunk_id"):
            out.append(int(item.chunk_id))
        elif isinstance(item, tuple | list):
            out.append(int(item[0]))
        else:
            out.append(int(item) + 1)  # a numpy row index; CHUNK_ID = index + 1
    return out


def _own_connection(path: Path, pragmas: list[str]) -> Any:
    import sqlean
    import sqlite_vec

    conn = sqlean.connect(str(path))
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    for pragma in pragmas:
        conn.execute(pragma).fetchall()
    return conn


# -- one size -----------------------------------------------------------------------
def scratch_system(base: Settings, tmp: str) -> RagSystem:
    model = base.model_path
    (Path(tmp) / "models").mkdir()
    try:
        os.link(model, Path(tmp) / "models" / model.name)
    except OSError:
        import shutil

        shutil.copyfile(model, Path(tmp) / "models" / model.name)
    rag = RagSystem(base.with_overrides(data_dir=tmp))
    rag.migrate()
    return rag


def load_rows(engine: Any, rows: list[tuple[Any, ...]], alternatives: bool) -> dict[str, float]:
    """Insert the synthetic chunks (FTS triggers fire); optionally build the alternative layouts."""
    seconds: dict[str, float] = {}
    raw = engine.sa_engine.raw_connection()
    try:
        cur = raw.cursor()
        for label, statements in (
            ("rag_chunk_insert_seconds", [(INSERT_CHUNK, rows), (INSERT_TERM, term_rows(rows))]),
            ("vec0_cosine_build_seconds", [(VEC0_DDL, None), (VEC0_FILL, None)]),
            (
                "vec0_l2_build_seconds",
                [
                    (
                        VEC0_DDL.replace("RAG_CHUNK_VEC", "RAG_CHUNK_VEC_L2").replace(
                            " distance_metric=cosine", ""
                        ),
                        None,
                    ),
                    (VEC0_FILL.replace("RAG_CHUNK_VEC", "RAG_CHUNK_VEC_L2"), None),
                ],
            ),
            ("narrow_table_build_seconds", [(NARROW_DDL, None)]),
        ):
            if label != "rag_chunk_insert_seconds" and not alternatives:
                continue
            started = time.perf_counter()
            cur.execute("BEGIN")
            for sql, params in statements:
                if params is None:
                    cur.execute(sql)
                else:
                    cur.executemany(sql, params)
            cur.execute("COMMIT")
            seconds[label] = round(time.perf_counter() - started, 2)
        cur.execute("ANALYZE")
    finally:
        raw.close()
    return seconds


def run_size(
    base: Settings,
    n: int,
    queries: list[str],
    rng: np.random.Generator,
    words: list[str],
    with_alternatives: bool,
    rounds: int,
) -> dict[str, Any]:
    out: dict[str, Any] = {"chunks": n, "k": K, "queries": len(queries), "rounds": rounds}
    with tempfile.TemporaryDirectory(prefix="oracle-rag-latency-") as tmp:
        rag = scratch_system(base, tmp)
        engine, settings = rag.engine, rag.settings
        vectors, rows = synthetic_rows(n, rng, words)
        out["build"] = load_rows(engine, rows, with_alternatives)
        runtime = engine.runtime()
        qvecs = [np.asarray(runtime.embed(t), dtype=np.float32) for t in queries]
        qblobs = [v.astype("<f4").tobytes() for v in qvecs]
        dev_rows = visible(rows, DEVELOPER)
        dev_matrix = vectors[dev_rows]
        truth = {
            "manager": [[int(j) + 1 for j in numpy_top(vectors, q, K)] for q in qvecs],
            "developer": [[int(dev_rows[j]) + 1 for j in numpy_top(dev_matrix, q, K)] for q in qvecs],
        }
        retriever = rag.retriever()
        # The same file with the in-process indexes off: the SQL the caches replace
        # (the exact vector scan; BM25 computed from the postings read in SQL).
        scan_rag = RagSystem(settings.with_overrides(embedded_vector_cache=False, embedded_term_index=False))
        scan_retriever = scan_rag.retriever()
        # BM25 in SQL exactly as Oracle runs it: N and the average length scanned in the statement
        # (scan_rag binds them from its per-scope cache).
        oracle_form_rag = RagSystem(
            settings.with_overrides(embedded_vector_cache=False, embedded_term_index=False)
        )
        oracle_form_rag.engine.keyword_stats_cached = False  # type: ignore[attr-defined]
        oracle_form_retriever = oracle_form_rag.retriever()
        started = time.perf_counter()
        engine.vector_cache().sync()  # the first search's full load, timed on its own
        out["build"]["vector_cache_load_seconds"] = round(time.perf_counter() - started, 2)
        out["build"]["vector_cache_mb"] = round(engine.vector_cache().nbytes / 1e6, 1)
        started = time.perf_counter()
        engine.term_index().sync()
        out["build"]["term_index_load_seconds"] = round(time.perf_counter() - started, 2)
        out["build"]["term_index_mb"] = round(engine.term_index().nbytes / 1e6, 1)
        fetch = min(max(K, settings.hybrid_depth), 400)
        weights = {"semantic": settings.semantic_weight, "keyword": settings.keyword_weight}
        owner = np.array([-1 if r[2] is None else r[2] for r in rows])
        is_task = np.array([r[0] == "TASK" for r in rows])

        with engine.connect() as conn:
            raw = engine.sa_engine.raw_connection()
            cur = raw.cursor()
            # Outside the pool, so the pragma cannot leak into the product's connections.
            mapped = (
                _own_connection(engine.path, ["PRAGMA mmap_size=1073741824"]) if with_alternatives else None
            )

            def by_vector(caller: Caller, k: int) -> Callable[[int], list[Hit]]:
                def run(i: int) -> list[Hit]:
                    binds = search_binds(caller.scope(), Filters(), qvec=qblobs[i], k=k)
                    return hits(conn.execute(stmt(SEMANTIC_BY_VECTOR, ("f_types",)), binds).fetchall())

                return run

            def hybrid_by_vector(caller: Caller, proposals: bool = True) -> Callable[[int], Any]:
                # Retriever.search's hybrid (search/hybrid.py) minus the query embedding. With
                # proposals=False the semantic leg proposes nothing: the legs re-checked in SQL
                # (the product's path before the proposals, and its fallback).
                def run(i: int) -> Any:
                    scope = caller.scope()
                    semantic = SemanticLeg(
                        lambda n, f: engine.semantic_search_by_vector(
                            conn, qblobs[i], n, scope, f, text=False
                        ),
                        lambda _index, n, f: (
                            engine.propose_semantic_by_vector(conn, qblobs[i], n, scope, f)
                            if proposals
                            else None
                        ),
                    )
                    return hybrid(engine, conn, settings, semantic, queries[i], K, scope, Filters())[0]

                return run

            def hybrid_full_legs(caller: Caller) -> Callable[[int], Any]:
                # The older design: both 100-deep legs with their text, then fusion.
                def run(i: int) -> Any:
                    scope = caller.scope()
                    legs = {
                        "semantic": engine.semantic_search_by_vector(
                            conn, qblobs[i], fetch, scope, semantic_leg_filters(settings, Filters())
                        ),
                        "keyword": engine.keyword_search(conn, queries[i], fetch, scope, Filters()),
                    }
                    return rrf(legs, K, settings.rrf_k, weights)

                return run

            def raw_sql(sql: str, binds: dict[str, Any]) -> Callable[[int], Any]:
                return lambda i: cur.execute(sql, {"qvec": qblobs[i], "k": K, **binds}).fetchall()

            def in_process(caller: Caller) -> Callable[[int], Any]:
                # An in-memory matrix the engine would keep in step with RAG_CHUNK:
                # the scope as numpy masks, then the k rows fetched from SQLite by id.
                mask = None if caller.sees_all else (owner == caller.employee_id) | ((owner == -1) & ~is_task)

                def run(i: int) -> Any:
                    scores = vectors @ qvecs[i]
                    if mask is not None:
                        scores = np.where(mask, scores, -np.inf)
                    top = np.argpartition(-scores, K)[:K]
                    ids = [int(j) + 1 for j in top[np.argsort(-scores[top], kind="stable")]]
                    marks = ",".join("?" * len(ids))
                    fetched = {r[0]: r for r in cur.execute(FETCH_BY_IDS.format(marks=marks), ids)}
                    return [fetched[j] for j in ids]

                return run

            def cached_by_vector(caller: Caller, k: int) -> Callable[[int], list[Hit]]:
                # The product path minus the query embedding: cache sync, masks,
                # top-k in numpy, the candidates re-checked in SQL.
                return lambda i: engine.semantic_search_by_vector(
                    conn, qblobs[i], k, caller.scope(), Filters()
                )

            variants: dict[str, Callable[[int], Any]] = {
                "embed_query_only": lambda i: runtime.embed(queries[i]),
                "numpy_exact_manager": lambda i: numpy_top(vectors, qvecs[i], K),
            }
            for label, caller in (("manager", MANAGER), ("developer", DEVELOPER)):
                variants[f"semantic_excl_embedding_{label}"] = cached_by_vector(caller, K)
                variants[f"semantic_incl_embedding_{label}"] = lambda i, c=caller: retriever.search(
                    queries[i], K, c, "semantic"
                )
                variants[f"semantic_scan_excl_embedding_{label}"] = by_vector(caller, K)
                variants[f"semantic_scan_incl_embedding_{label}"] = lambda i, c=caller: scan_retriever.search(
                    queries[i], K, c, "semantic"
                )
                variants[f"keyword_{label}"] = lambda i, c=caller: retriever.search(
                    queries[i], K, c, "keyword"
                )
                variants[f"keyword_sql_{label}"] = lambda i, c=caller: scan_retriever.search(
                    queries[i], K, c, "keyword"
                )
                variants[f"keyword_sql_scanned_stats_{label}"] = lambda i, c=caller: (
                    oracle_form_retriever.search(queries[i], K, c, "keyword")
                )
                variants[f"hybrid_excl_embedding_{label}"] = hybrid_by_vector(caller)
                variants[f"hybrid_checked_legs_excl_embedding_{label}"] = hybrid_by_vector(
                    caller, proposals=False
                )
                variants[f"hybrid_incl_embedding_{label}"] = lambda i, c=caller: retriever.search(
                    queries[i], K, c, "hybrid"
                )
            # The older design, placed apart from hybrid_excl: a variant run right after another
            # on the same query finds its pages and matrix warm.
            variants = {
                "hybrid_full_legs_excl_embedding_manager": hybrid_full_legs(MANAGER),
                **variants,
                "hybrid_full_legs_excl_embedding_developer": hybrid_full_legs(DEVELOPER),
            }
            alt: dict[str, tuple[str, Callable[[int], Any]]] = {}
            if with_alternatives:
                dev = {"caller_id": DEVELOPER.employee_id}
                alt = {
                    "product_sql_mmap_manager": (
                        "manager",
                        lambda i: mapped.execute(  # type: ignore[union-attr]
                            SEMANTIC_BY_VECTOR_NO_TYPES,
                            {
                                "qvec": qblobs[i],
                                "k": K,
                                "see_all": 1,
                                "caller_id": 3,
                                "f_project": None,
                                "f_sprint": None,
                            },
                        ).fetchall(),
                    ),
                    "scalar_l2_manager": ("manager", raw_sql(SCALAR_L2, {"see_all": 1, "caller_id": 3})),
                    "scalar_l2_developer": ("developer", raw_sql(SCALAR_L2, {"see_all": 0, **dev})),
                    "narrow_table_manager": ("manager", raw_sql(NARROW_KNN, {"see_all": 1, "caller_id": 3})),
                    "narrow_table_developer": ("developer", raw_sql(NARROW_KNN, {"see_all": 0, **dev})),
                    "vec0_cosine_manager": ("manager", raw_sql(VEC0_KNN_ALL, {})),
                    "vec0_cosine_developer_joined": ("developer", raw_sql(VEC0_KNN_JOINED, dev)),
                    "vec0_l2_manager": (
                        "manager",
                        raw_sql(VEC0_KNN_ALL.replace("RAG_CHUNK_VEC", "RAG_CHUNK_VEC_L2"), {}),
                    ),
                    "vec0_l2_developer_joined": (
                        "developer",
                        raw_sql(VEC0_KNN_JOINED.replace("RAG_CHUNK_VEC", "RAG_CHUNK_VEC_L2"), dev),
                    ),
                    "numpy_in_process_manager": ("manager", in_process(MANAGER)),
                    "numpy_in_process_developer": ("developer", in_process(DEVELOPER)),
                }
                variants.update({name: fn for name, (_, fn) in alt.items()})
            try:
                cpu: dict[str, list[float]] = {}
                times, outputs = interleaved(variants, len(queries), rounds, cpu)
            finally:
                raw.close()
                if mapped is not None:
                    mapped.close()

        timings = {name: summary(t) for name, t in times.items()}
        for name, t in cpu.items():
            timings[name]["cpu_p50_ms"] = round(float(np.percentile(t, 50)), 3)
        numpy_p50 = timings["numpy_exact_manager"]["p50_ms"]
        for row in timings.values():
            row["ratio_to_numpy_p50"] = round(row["p50_ms"] / numpy_p50, 2)
        checks: dict[str, Any] = {}
        for label in ("manager", "developer"):

            def ids(variant: str, label: str = label) -> list[list[int]]:
                return [ids_of(r) for r in outputs[f"{variant}_{label}"]]

            sem = ids("semantic_excl_embedding")
            scan = ids("semantic_scan_excl_embedding")
            checks[f"recall@{K}_semantic_vs_numpy_{label}"] = recall(sem, truth[label])
            checks[f"recall@{K}_semantic_incl_embedding_vs_numpy_{label}"] = recall(
                ids("semantic_incl_embedding"), truth[label]
            )
            checks[f"recall@{K}_semantic_scan_vs_numpy_{label}"] = recall(scan, truth[label])
            checks[f"semantic_incl_equals_excl_{label}"] = ids("semantic_incl_embedding") == sem
            checks[f"semantic_cache_equals_scan_{label}"] = sem == scan
            checks[f"keyword_index_equals_sql_{label}"] = ids("keyword") == ids("keyword_sql")
            checks[f"keyword_index_equals_sql_scanned_stats_{label}"] = ids("keyword") == ids(
                "keyword_sql_scanned_stats"
            )
            checks[f"hybrid_equals_full_legs_{label}"] = ids("hybrid_excl_embedding") == ids(
                "hybrid_full_legs_excl_embedding"
            )
            checks[f"hybrid_equals_checked_legs_{label}"] = ids("hybrid_excl_embedding") == ids(
                "hybrid_checked_legs_excl_embedding"
            )
            checks[f"hybrid_incl_equals_excl_{label}"] = ids("hybrid_incl_embedding") == ids(
                "hybrid_excl_embedding"
            )
        checks["cache_fallbacks"] = engine.cache_fallbacks
        checks["cache_full_loads"] = engine.vector_cache().full_loads
        for name, (label, _) in alt.items():
            checks[f"recall@{K}_{name}"] = recall([ids_of(r) for r in outputs[name]], truth[label])
        out["checks"] = checks
        out["ratio_semantic_excl_to_numpy_p50"] = timings["semantic_excl_embedding_manager"][
            "ratio_to_numpy_p50"
        ]
        out["ratio_semantic_scan_excl_to_numpy_p50"] = timings["semantic_scan_excl_embedding_manager"][
            "ratio_to_numpy_p50"
        ]
        out["goals"] = goals(timings, n)
        out["timings"] = timings
        scan_rag.close()
        oracle_form_rag.close()
        rag.close()
    return out


def goals(timings: dict[str, dict[str, float]], n: int) -> dict[str, dict[str, Any]]:
    """The targets (manager scope, p50 ratio to numpy exact in the same run).

    numpy's baseline has no query embedding, and at 10k the embedding alone (~4.4 ms) is over 3x
    numpy's 1.4 ms, so semantic and hybrid are held to the targets excluding the query embedding
    (keyword embeds nothing); the "incl." variants are reported next to them.
    """
    limits = (
        {"keyword": 3.0, "hybrid": 4.0, "semantic": 1.5}
        if n >= 100_000
        else {"keyword": 3.0, "hybrid": 3.0, "semantic": 3.0}
    )
    # BM25 computed in SQL on the embedded engine, at most 5x numpy exact at 100k.
    limits["keyword_sql"] = 5.0
    out = {}
    for mode, limit in limits.items():
        name = f"{mode}_manager" if mode.startswith("keyword") else f"{mode}_excl_embedding_manager"
        ratio = timings[name]["ratio_to_numpy_p50"]
        out[mode] = {"variant": name, "ratio": ratio, "limit": limit, "met": ratio <= limit}
    # Hybrid no slower than its legs run on their own (p50, query vector given).
    legs = timings["semantic_excl_embedding_manager"]["p50_ms"] + timings["keyword_manager"]["p50_ms"]
    cpu_legs = timings["semantic_excl_embedding_manager"].get("cpu_p50_ms", 0.0) + timings[
        "keyword_manager"
    ].get("cpu_p50_ms", 0.0)
    cpu_ratio = (
        round(timings["hybrid_excl_embedding_manager"].get("cpu_p50_ms", 0.0) / cpu_legs, 3)
        if cpu_legs
        else None
    )
    ratio = round(timings["hybrid_excl_embedding_manager"]["p50_ms"] / legs, 3)
    before = round(timings["hybrid_full_legs_excl_embedding_manager"]["p50_ms"] / legs, 3)
    checked = round(timings["hybrid_checked_legs_excl_embedding_manager"]["p50_ms"] / legs, 3)
    out["hybrid_vs_legs"] = {
        "variant": "hybrid_excl_embedding_manager / (semantic_excl_embedding_manager + keyword_manager)",
        "ratio": ratio,
        "limit": 1.1,
        "met": ratio <= 1.1,
        "ratio_with_full_legs (older design)": before,
        "ratio_with_checked_legs (each leg re-checked in SQL)": checked,
        "ratio_cpu_time (thread CPU p50s, same runs)": cpu_ratio,
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument(
        "--no-alternatives",
        action="store_true",
        help="Skip the experiments with other KNN layouts (vec0, narrow table, in-process).",
    )
    parser.add_argument("--rounds", type=int, default=2, help="Passes over the queries per variant.")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    from oracle_rag.embedding import ensure_model

    base = load_settings()
    ensure_model(base.data_path)  # the configured model, linked into each scratch dir
    rng = np.random.default_rng(20261130)
    words = vocabulary(rng)
    qrng = np.random.default_rng(7)
    queries = [
        " ".join(words[int(t)] for t in zipf_ids(qrng, len(words), int(qrng.integers(2, 6))))
        for _ in range(args.queries)
    ]
    results: dict[str, Any] = {
        "environment": {
            "python": platform.python_version(),
            "machine": platform.machine(),
            "cpus": os.cpu_count(),
            "sqlite": __import__("sqlean").sqlite_version,
            "numpy": np.__version__,
            "openblas_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
            "load_average_at_start": os.getloadavg(),
        },
        "sizes": [],
    }
    for n in args.sizes:
        print(f"{n} chunks ...", file=sys.stderr)
        size = run_size(base, n, queries, rng, words, not args.no_alternatives, args.rounds)
        results["sizes"].append(size)
        print(f"  build {size['build']}; ms per query (k={K}, {len(queries)} queries x {args.rounds})")
        print(f"  {'variant':<44} {'p50':>9} {'p95':>9} {'/numpy':>7} {'cpu p50':>8}")
        for name, row in size["timings"].items():
            print(
                f"  {name:<44} {row['p50_ms']:>9.2f} {row['p95_ms']:>9.2f} {row['ratio_to_numpy_p50']:>6}x"
                f" {row.get('cpu_p50_ms', float('nan')):>8.2f}"
            )
        for name, value in size["checks"].items():
            print(f"  {name}: {value}")
        for mode, goal in size["goals"].items():
            extra = {k: v for k, v in goal.items() if k not in ("variant", "ratio", "limit", "met")}
            print(
                f"  goal {mode}: {goal['variant']} {goal['ratio']}x <= {goal['limit']}x: "
                f"{'met' if goal['met'] else 'NOT met'}" + (f" {extra}" if extra else "")
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
