"""The scope of candidate re-checks and the in-process group masks ('s cost of the predicate).

The re-checks of a few candidate ids use ``engine_sql.SCOPE_OF_IDS`` (the
ACL probed per candidate); the property test (tests/test_access_property.py)
holds every search entry point to the declared policy, so these tests pin
what that does not: the two predicate texts are the same rule, the group
masks follow membership changes, and the keyword statistics are cached per
group set.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from model_helpers import link_model

from oracle_rag.callers.caller import Caller
from oracle_rag.config import load_settings
from oracle_rag.engines import ChunkWrite, Filters, Scope, content_hash, engine_sql
from oracle_rag.engines.access_mask import NULL, AccessSlots
from oracle_rag.engines.records import RecordAccess, search_binds
from oracle_rag.system import RagSystem
from oracle_rag.text.bm25 import analyze_record

DOCS = {
    "1": ("alpha beta", RecordAccess(owner=5)),
    "2": ("alpha gamma", RecordAccess(groups=("ops",))),
    "3": ("alpha delta", RecordAccess(groups=("net", "ops"))),
    "4": ("alpha omega", RecordAccess(public=True)),
    "5": ("alpha kappa", RecordAccess(owner=6, groups=("fin",))),
}


def _fill(rag) -> None:
    engine = rag.engine
    with engine.begin() as conn:
        engine.upsert_chunks(
            conn,
            [
                ChunkWrite("DOC", i, t, content_hash(t), analysis=analyze_record(t), access=a)
                for i, (t, a) in DOCS.items()
            ],
        )


SCOPES = [
    Scope(5, False),
    Scope(5, False, ("ops",)),
    Scope(6, False, ("net", "fin")),
    Scope(7, False, ("none",)),
    Scope(7, True),
]


def test_scope_of_ids_is_the_scope_rule(rag):
    """Per candidate id, the probing form lets through exactly what SCOPE does, for every caller."""
    _fill(rag)
    engine = rag.engine
    by_ids = sa.text(
        "SELECT c.SOURCE_ID FROM RAG_CHUNK c WHERE c.CHUNK_ID IN :ids AND "
        + engine_sql.SCOPE_OF_IDS
        + " ORDER BY c.SOURCE_ID"
    ).bindparams(sa.bindparam("ids", expanding=True), sa.bindparam("access_groups", expanding=True))
    whole = sa.text(
        "SELECT c.SOURCE_ID FROM RAG_CHUNK c WHERE " + engine_sql.SCOPE + " ORDER BY c.SOURCE_ID"
    ).bindparams(sa.bindparam("access_groups", expanding=True))
    with engine.connect() as conn:
        ids = [int(r[0]) for r in conn.execute(sa.text("SELECT CHUNK_ID FROM RAG_CHUNK"))]
        seen = {}
        for scope in SCOPES:
            binds = search_binds(scope, Filters(), ids=ids)
            got = [r[0] for r in conn.execute(by_ids, binds)]
            assert got == [r[0] for r in conn.execute(whole, scope.binds())]
            seen[scope] = got
    assert seen[SCOPES[0]] == ["1", "4"]
    assert seen[SCOPES[1]] == ["1", "2", "3", "4"]
    assert seen[SCOPES[2]] == ["3", "4", "5"]
    assert seen[SCOPES[3]] == ["4"]
    assert seen[SCOPES[4]] == ["1", "2", "3", "4", "5"]


def test_keyword_statistics_are_cached_per_group_set(rag):
    """N and the total length of the visible set depend on the caller's groups, not only on the id."""
    _fill(rag)
    engine = rag.engine
    with engine.connect() as conn:
        alone, member = Scope(5, False), Scope(5, False, ("ops",))
        assert engine.keyword_stats(conn, alone, Filters(), None).n == 2
        assert engine.keyword_stats(conn, member, Filters(), None).n == 4
        assert engine.keyword_stats(conn, alone, Filters(), None).n == 2


def test_group_masks_follow_membership_changes():
    slots = AccessSlots()
    slots.grow(4)
    slots.set(0, int(NULL), 0, json.dumps(["ops"]))
    slots.set(1, int(NULL), 0, json.dumps(["net"]))
    types, codes = np.zeros(4, dtype=np.int32), {"DOC": 0}
    ops = Scope(9, False, ("ops", "ops"))

    def visible(scope: Scope) -> list[int]:
        return [int(i) for i in np.flatnonzero(slots.visible(4, scope, types, codes, ()))]

    assert visible(ops) == [0]  # the group's slots, now kept as an array
    slots.set(2, int(NULL), 0, json.dumps(["ops", "net"]))
    assert visible(ops) == [0, 2]
    slots.clear(0)
    assert visible(ops) == [2]
    slots.set(2, 9, 0, None)  # re-scoped: owned by the caller, no group
    assert visible(ops) == [2] and visible(Scope(8, False, ("ops",))) == []
    assert visible(Scope(8, False, ("net",))) == [1]
    slots.set(3, int(NULL), 0, json.dumps(["ops"]))
    assert visible(Scope(8, False, ("ops", "net"))) == [1, 3]


# -- hybrid's legs proposed by the in-process indexes (search/hybrid.py) ------------------------------
QUESTIONS = [
    "invoice PDF generation",
    "sprint review demo",
    "login error after password reset",
    "payment gateway timeout",
]


@pytest.fixture
def pair(tmp_path: Path, demo_template: Path, model_path: Path):
    """The demo data twice on one file: the indexes on (proposals) and off (every leg checked in SQL)."""
    d = tmp_path / "hybrid"
    link_model(model_path, d)
    shutil.copyfile(demo_template, d / "oracle-rag.db")
    cached = RagSystem(load_settings(env={}, data_dir=str(d)))
    scan = RagSystem(
        load_settings(env={}, data_dir=str(d), embedded_vector_cache=False, embedded_term_index=False)
    )
    yield cached, scan
    cached.close()
    scan.close()


def _shown(results) -> list[tuple]:
    return [
        (r.source_type, r.source_id, r.chunk_id, r.chunk_no, r.content, r.facets, r.score, r.legs, r.rank)
        for r in results
    ]


def test_hybrid_from_proposals_equals_the_checked_legs(pair):
    cached, scan = pair
    for caller in (
        Caller(3, "manager", name="m"),
        Caller(12, "developer", name="d"),
        Caller(20, "developer"),
    ):
        for question in QUESTIONS:
            got = cached.retriever().search(question, 8, caller, "hybrid")
            want = scan.retriever().search(question, 8, caller, "hybrid")
            assert got and _shown(got) == _shown(want), (caller, question)
            assert [r.distance is None for r in got] == [r.distance is None for r in want]
            assert np.allclose(
                [r.distance or 0.0 for r in got], [r.distance or 0.0 for r in want], rtol=0, atol=1e-6
            )
    assert cached.engine.cache_fallbacks == 0  # answered from the proposals


def test_a_hidden_record_proposed_by_a_wrong_mask_never_shows_and_the_ranks_refill(pair):
    """The indexes wrongly believe developer 12 owns another developer's tasks: hybrid's re-check of
    the records shown drops them, the indexes are repaired, and the checked legs give the k records
    the scan gives."""
    cached, scan = pair
    dev = Caller(12, "developer", name="dev")
    with cached.engine.connect() as conn:
        foreign = conn.execute(
            sa.text(
                "SELECT CHUNK_ID, CONTENT FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND OWNER_ID = 20 AND CHUNK_NO = 0 "
                "ORDER BY CHUNK_ID LIMIT 3"
            )
        ).fetchall()
    question = foreign[0][1][:200]
    want = scan.retriever().search(question, 8, dev, "hybrid")
    assert len(want) == 8
    cached.retriever().search("warm up", 1, dev, "hybrid")
    cache, index = cached.engine.vector_cache(), cached.engine.term_index()
    for chunk_id, _ in foreign:
        cache._access.owner[cache._slot[int(chunk_id)]] = 12
        index._access.owner[index._slot[int(chunk_id)]] = 12
    got = cached.retriever().search(question, 8, dev, "hybrid")
    assert {int(c) for c, _ in foreign}.isdisjoint(r.chunk_id for r in got)
    assert cached.engine.cache_fallbacks == 1
    assert _shown(got) == _shown(want)
    # the entries re-read: the next search is answered from the proposals again, the same way
    assert cache._access.owner[cache._slot[int(foreign[0][0])]] == 20
    assert index._access.owner[index._slot[int(foreign[0][0])]] == 20
    assert _shown(cached.retriever().search(question, 8, dev, "hybrid")) == _shown(want)
    assert cached.engine.cache_fallbacks == 1


def test_near_ties_are_ordered_by_sqls_distances(pair):
    """Candidates closer than near_tie are ranked by SQL's distance, as the checked leg ranks them."""
    cached, _ = pair
    engine = cached.engine
    engine.near_tie = 1.0  # every candidate in one run: all ordered by SQL's distances
    manager = Caller(3, "manager", name="m")
    with engine.connect() as conn:
        for question in QUESTIONS:
            qblob = bytes(conn.execute(sa.text("SELECT vector_embedding(:t)"), {"t": question}).scalar_one())
            proposed = engine.propose_semantic_by_vector(conn, qblob, 30, manager.scope(), Filters())
            checked = engine.semantic_search_by_vector(
                conn, qblob, 30, manager.scope(), Filters(), text=False
            )
            assert proposed is not None
            assert [(h.chunk_id, h.score) for h in proposed] == [(h.chunk_id, h.score) for h in checked]


def test_near_ties_the_cache_orders_otherwise_are_ranked_as_sql_ranks_them(pair):
    """The keyword leg's four best records, a hair from the question (SQL distances ~1e-6 apart) that the cache orders the other
    way round (their vectors permuted in the cache, each within DISTANCE_TOLERANCE of SQL's): they open
    the semantic leg and all show, so hybrid settles their run in SQL and shows what the checked legs show."""
    cached, scan = pair
    engine = cached.engine
    manager = Caller(3, "manager", name="m")
    question = QUESTIONS[0]
    with engine.connect() as conn:
        q = np.frombuffer(
            bytes(conn.execute(sa.text("SELECT vector_embedding(:t)"), {"t": question}).scalar_one()),
            dtype="<f4",
        ).astype(np.float64)
        record = {
            int(
                conn.execute(
                    sa.text(
                        "SELECT CHUNK_ID FROM RAG_CHUNK WHERE SOURCE_TYPE = :t AND SOURCE_ID = :s AND CHUNK_NO = 0"
                    ),
                    {"t": r.source_type, "s": r.source_id},
                ).scalar_one()
            ): r.source_id
            for r in scan.retriever().search(question, 4, manager, "keyword")
        }  # the keyword leg's best 4
    ids = list(record)
    q /= np.linalg.norm(q)
    u = np.random.default_rng(3).standard_normal(len(q))
    u -= (u @ q) * q
    u /= np.linalg.norm(u)
    with engine.begin() as conn:
        for i, chunk_id in enumerate(ids):  # 1 - cos = eps^2 / 2 = 1e-5 + 1e-6 i
            v = q + np.sqrt(2 * (1e-5 + 1e-6 * i)) * u
            conn.execute(
                sa.text("UPDATE RAG_CHUNK SET EMBEDDING = :v WHERE CHUNK_ID = :id"),
                {"v": (v / np.linalg.norm(v)).astype("<f4").tobytes(), "id": chunk_id},
            )
    with engine.connect() as conn:
        qblob = q.astype("<f4").tobytes()
        exact = dict(
            conn.execute(
                engine.statement(engine_sql.CANDIDATE_DISTANCES, gen=engine.active_generation(conn)),
                {"qvec": qblob, "ids": json.dumps(ids)},
            ).fetchall()
        )
    sql_order = sorted(ids, key=lambda i: (exact[i], i))
    cache = engine.vector_cache()
    cache.sync()
    slots = [cache._slot[i] for i in sql_order]
    cache._vectors[slots] = cache._vectors[slots][::-1].copy()
    found = cache.candidates(q.astype(np.float32), 8, manager.scope(), Filters(first_chunk=True), keys=True)
    assert [row[0] for row in found.ranked if row[0] in exact] == sql_order[::-1]  # the cache disagrees

    want = scan.retriever().search(question, 8, manager, "hybrid")
    got = cached.retriever().search(question, 8, manager, "hybrid")
    assert [r.source_id for r in want if r.source_id in record.values()] == [record[i] for i in sql_order]
    assert _shown(got) == _shown(want)
    assert np.allclose([r.distance or 0.0 for r in got], [r.distance or 0.0 for r in want], rtol=0, atol=1e-6)
    assert engine.cache_fallbacks == 0
