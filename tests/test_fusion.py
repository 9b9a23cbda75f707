"""Hybrid is, by construction, the fusion of two record lists: RRF (the default) or z-scores.

The quality baseline (bench/data/cranfield/SOURCE.md) fuses BM25 over each
record with dense retrieval of each record as the model reads it (its first
256 wordpieces), each list cut to 100, score = sum of 1 / (60 + rank). With
``hybrid_semantic_chunk = FIRST`` the product fuses exactly those two lists;
with ``NEAREST`` it fuses semantic mode's list (each record at its nearest
chunk) instead. Both are pinned here against lists computed independently:
keyword mode's ranking, and a numpy ranking of the stored first-chunk
vectors (not the engine's filter, nor its cache). Real SQLite files, the
real model, records long enough to be several chunks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from model_helpers import link_model

from oracle_rag.callers.caller import Caller
from oracle_rag.engines import Filters, embed_text
from oracle_rag.sources import Document, Source

MANAGER = Caller(employee_id=1, role="manager", name="m")
FILLER = (
    "The quarterly planning meeting reviewed the roadmap for the mobile application and agreed to move "
    "the onboarding redesign into the next sprint, pending a review of the analytics dashboards. "
)
NOTES = {
    # long records: a first window about one thing, later windows about another
    "long-gen": FILLER * 12
    + "The backup diesel generator at the Reykjavik data centre is serviced by Nordlys Power.",
    "long-pay": "Payment gateway timeouts during checkout. "
    + FILLER * 10
    + "Invoices in PDF fail to render for customers in Spain.",
    "long-sso": "Single sign-on rollout plan for the identity provider. "
    + FILLER * 9
    + "The generator fuel contract was renewed for two years.",
    "gen": "The office generator was replaced last year after a failed inspection.",
    "dc": "Our data centre in Frankfurt is audited every spring for power redundancy.",
    "pay": "Checkout payments time out when the gateway is slow; retries double charge customers.",
    "pdf": "PDF invoice generation fails for Spanish customers because of a font issue.",
    "sso": "Users cannot log in with single sign-on after the password reset.",
    "plan": FILLER,
}
QUESTIONS = [
    "Who services the backup generator at the Reykjavik data centre?",
    "payment gateway timeout at checkout",
    "PDF invoices fail for customers in Spain",
    "single sign-on login problems",
    "roadmap for the mobile application",
]
FIRST_CHUNKS = sa.text("SELECT CHUNK_ID, SOURCE_ID, EMBEDDING FROM RAG_CHUNK WHERE CHUNK_NO = 0")


class NoteSource(Source):
    SOURCE_TYPE = "NOTE"

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        return {i: Document("NOTE", i, NOTES[i]) for i in ids if i in NOTES}

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return list(NOTES)


@pytest.fixture(scope="module")
def indexed(tmp_path_factory, model_path):
    """The notes indexed once; each test opens systems with the settings it studies."""

    from oracle_rag.config import load_settings
    from oracle_rag.system import RagSystem

    d = tmp_path_factory.mktemp("fusion")
    link_model(model_path, d)
    system = RagSystem(load_settings(env={}, data_dir=str(d)), sources=[NoteSource()])
    system.migrate()
    with system.engine.begin() as conn:
        system.indexer.apply(conn, [("NOTE", i) for i in NOTES])
    with system.engine.connect() as conn:
        chunks = {
            r[0]: r[1]
            for r in conn.exec_driver_sql("SELECT SOURCE_ID, COUNT(*) FROM RAG_CHUNK GROUP BY SOURCE_ID")
        }
    assert all(chunks[i] > 1 for i in ("long-gen", "long-pay", "long-sso")), chunks
    system.close()

    def open_system(**overrides: Any) -> Any:
        return RagSystem(load_settings(env={}, data_dir=str(d), **overrides), sources=[NoteSource()])

    return open_system


def _first_window_ranking(conn: Any, question: str) -> list[tuple[str, int]]:
    """(record, chunk id) by cosine distance of the record's first chunk, in numpy: the reference's dense list."""
    query = np.frombuffer(
        bytes(conn.exec_driver_sql("SELECT vector_embedding(?)", (embed_text(question),)).scalar_one()),
        dtype="<f4",
    ).astype(np.float64)
    rows = conn.execute(FIRST_CHUNKS).fetchall()
    dist = []
    for chunk_id, source_id, blob in rows:
        v = np.frombuffer(bytes(blob), dtype="<f4").astype(np.float64)
        dist.append(
            (1.0 - float(v @ query) / (np.linalg.norm(v) * np.linalg.norm(query)), int(chunk_id), source_id)
        )
    return [(s, c) for _, c, s in sorted(dist)]


def _reference_rrf(
    lists: Mapping[str, Sequence[tuple[str, int]]], rrf_k: int, k: int
) -> list[tuple[str, float]]:
    """Sum of 1 / (rrf_k + rank) over the lists; ties by the best rank, then the shown chunk's id."""
    score: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}
    for ranked in lists.values():
        for rank, (record, chunk_id) in enumerate(ranked, 1):
            score[record] = score.get(record, 0.0) + 1.0 / (rrf_k + rank)
            best[record] = min(best.get(record, (rank, chunk_id)), (rank, chunk_id))
    order = sorted(score, key=lambda r: (-score[r], best[r]))[:k]
    return [(r, score[r]) for r in order]


@pytest.mark.parametrize("depth", [3, 6, 100])
def test_hybrid_is_the_rrf_of_keyword_and_first_window_lists(indexed, depth) -> None:
    system = indexed(hybrid_depth=depth, hybrid_fusion="rrf")  # hybrid_semantic_chunk = FIRST is the default
    try:
        assert system.settings.hybrid_semantic_chunk == "FIRST"
        retriever = system.retriever()
        for question in QUESTIONS:
            k = min(5, depth)
            fetch = max(k, depth)
            with system.engine.connect() as conn:
                dense = _first_window_ranking(conn, question)[:fetch]
                chunk0 = {s: c for c, s, _ in conn.execute(FIRST_CHUNKS)}
            # a record's keyword hit is shown from its chunk 0 in the leg (its passage comes later)
            keyword = [
                (h.source_id, chunk0[h.source_id])
                for h in retriever.search(question, fetch, MANAGER, "keyword")
            ]
            want = _reference_rrf({"semantic": dense, "keyword": keyword}, system.settings.rrf_k, k)
            got = retriever.search(question, k, MANAGER, "hybrid")
            assert [h.source_id for h in got] == [r for r, _ in want], question
            assert [h.score for h in got] == pytest.approx([s for _, s in want], abs=1e-12), question
            assert retriever.last_stats is not None and retriever.last_stats.legs["semantic"] == min(
                fetch, len(NOTES)
            )
    finally:
        system.close()


def test_nearest_fuses_semantic_modes_list_and_differs_on_a_deep_fact(indexed) -> None:
    first, nearest = (
        indexed(hybrid_fusion="rrf"),
        indexed(hybrid_semantic_chunk="NEAREST", hybrid_fusion="rrf"),
    )
    try:
        question = QUESTIONS[0]  # its answer is in long-gen's last window only
        r = nearest.retriever()
        semantic = [(h.source_id, h.chunk_id) for h in r.search(question, 100, MANAGER, "semantic")]
        keyword = [(h.source_id, h.chunk_id) for h in r.search(question, 100, MANAGER, "keyword")]
        # the reference tie rule needs the shown chunk: keyword shows chunk 0's id for a record, semantic its nearest
        with nearest.engine.connect() as conn:
            chunk0 = {s: c for c, s, _ in conn.execute(FIRST_CHUNKS)}
        keyword = [(s, chunk0[s]) for s, _ in keyword]
        want = _reference_rrf({"semantic": semantic, "keyword": keyword}, nearest.settings.rrf_k, 5)
        got = r.search(question, 5, MANAGER, "hybrid")
        assert [(h.source_id, h.score) for h in got] == [(s, pytest.approx(v, abs=1e-12)) for s, v in want]
        # semantic mode ranks long-gen by its last window, the first-window list far lower: the settings differ
        assert semantic[0][0] == "long-gen"
        with first.engine.connect() as conn:
            assert [s for s, _ in _first_window_ranking(conn, question)].index("long-gen") > 0
        assert [h.source_id for h in got] != [
            h.source_id for h in first.retriever().search(question, 5, MANAGER, "hybrid")
        ]
    finally:
        first.close()
        nearest.close()


def test_first_chunk_filter_is_the_same_on_the_cache_and_the_sql_scan(indexed) -> None:
    cached, scan = indexed(), indexed(embedded_vector_cache=False)
    try:
        filters = Filters(first_chunk=True)
        for question in QUESTIONS:
            with cached.engine.connect() as conn:
                want = [s for s, _ in _first_window_ranking(conn, question)][:6]
                a = cached.engine.semantic_search(conn, embed_text(question), 6, MANAGER.scope(), filters)
            with scan.engine.connect() as conn:
                b = scan.engine.semantic_search(conn, embed_text(question), 6, MANAGER.scope(), filters)
            assert [h.source_id for h in a] == [h.source_id for h in b] == want, question
            assert all(h.chunk_no == 0 for h in a + b)
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-5)
        assert cached.engine.vector_cache().loaded  # the cache answered, not a fallback to the scan
    finally:
        cached.close()
        scan.close()


def test_the_evaluations_plain_rrf_by_hand() -> None:
    from oracle_rag.evaluation import plain_rrf

    # 1: 1/61 + 1/63 and 3: 1/63 + 1/61 tie (ascending id); 2 and 4: 1/62 each; ids compare as numbers
    assert plain_rrf([["1", "2", "3"], ["3", "4", "1"]]) == ["1", "3", "2", "4"]
    assert plain_rrf([["10"], ["9"]]) == ["9", "10"]
    assert plain_rrf([["b", "a"], ["a", "b"]], cut=1) == ["a"]
    assert plain_rrf([["1", "2"]], rrf_k=1) == ["1", "2"]


# -- near ties left open by the vector cache (SemanticHits, fusion.Fusion.runs_that_matter) --------------
def _near_tie_case(rng: np.random.Generator) -> tuple[list[Any], list[Any], list[tuple[int, int]], list[Any]]:
    """A semantic leg in SQL's order, the same leg with runs of near ties in another order (as the
    cache may propose it, each with the cache's distances), the runs, and a keyword leg."""
    from oracle_rag.engines import Hit

    pool = [("TASK", str(i)) for i in range(200)]
    semantic_keys = [pool[int(i)] for i in rng.permutation(200)[: int(rng.integers(20, 60))]]
    truth = [Hit(i + 1, t, s, "", 0.1 + 0.001 * i) for i, (t, s) in enumerate(semantic_keys)]
    runs: list[tuple[int, int]] = []
    a = int(rng.integers(0, 3))
    while a < len(truth) - 1:
        b = min(len(truth), a + int(rng.integers(2, 5)))
        runs.append((a, b))
        a = b + int(rng.integers(1, 8))
    proposed = list(truth)
    for a, b in runs:
        order = rng.permutation(b - a)
        proposed[a:b] = [
            Hit(h.chunk_id, h.source_type, h.source_id, "", h.score + 1e-7)
            for h in (truth[a + int(j)] for j in order)
        ]
    keyword_keys = [pool[int(i)] for i in rng.permutation(200)[: int(rng.integers(10, 60))]]
    keyword = [Hit(1000 + i, t, s, "", 50.0 - i) for i, (t, s) in enumerate(keyword_keys)]
    return truth, proposed, runs, keyword


def test_only_the_near_ties_that_can_change_the_fused_top_k_need_sqls_order() -> None:
    """Settling just the runs Fusion.runs_that_matter names gives exactly the fusion of the legs in SQL's
    order (records, order, scores, distances), on random legs where leaving every run as the cache
    proposed it often gives another top k, and most runs need no settling."""
    from oracle_rag.search.fusion import Fusion, rrf

    rng = np.random.default_rng(25)
    weights = {"semantic": 1.0, "keyword": 1.0}
    differs = settled_deep = skipped = total = 0
    for trial in range(400):
        truth, proposed, runs, keyword = _near_tie_case(rng)
        k = int(rng.integers(1, 11))
        w = (
            weights
            if trial % 3
            else {"semantic": float(rng.uniform(0, 3)), "keyword": float(rng.uniform(0, 3))}
        )
        want = rrf({"semantic": truth, "keyword": keyword}, k, 60, w)
        needed = Fusion({"semantic": proposed, "keyword": keyword}, 60, w).runs_that_matter(runs, k)
        settled = list(proposed)
        for a, b in needed:
            settled[a:b] = truth[a:b]
        assert rrf({"semantic": settled, "keyword": keyword}, k, 60, w) == want, trial
        differs += rrf({"semantic": proposed, "keyword": keyword}, k, 60, w) != want
        settled_deep += any(a >= k for a, _ in needed)  # a run below the k that a keyword rank lifts
        skipped += len(runs) - len(needed)
        total += len(runs)
    assert differs > 100 and settled_deep > 20 and skipped > total // 2


def test_rrf_equals_its_definition_hit_by_hit() -> None:
    """Fusion (scores summed per record, the rest looked up for the contenders only) gives exactly what
    the definition's loop over every hit gives: records, order, scores, legs, chunks, distances, ties."""
    from oracle_rag.engines import Hit
    from oracle_rag.search.fusion import _rrf_by_definition, rrf

    rng = np.random.default_rng(6)
    ties = 0
    for trial in range(300):
        pool = [("TASK" if i % 3 else "SPRINT", str(i)) for i in range(int(rng.integers(5, 120)))]
        legs = {}
        for n, leg in enumerate(("semantic", "keyword")):
            keys = [pool[int(i)] for i in rng.permutation(len(pool))[: int(rng.integers(0, len(pool) + 1))]]
            legs[leg] = [
                Hit(1000 * n + i, t, s, f"{leg} {s}", float(rng.random())) for i, (t, s) in enumerate(keys)
            ]
        weights = [{}, {"semantic": 1.0, "keyword": 2.0}, {"semantic": 0.0}][trial % 3]
        k = int(rng.integers(1, 12))
        want = _rrf_by_definition(legs, k, 60, weights)
        assert rrf(legs, k, 60, weights) == want, trial
        ties += len({r.score for r in want}) < len(want)
    assert ties > 15


# -- score-normalised fusion (hybrid_fusion = ZSCORE) ----------------------------------------------------
def _reference_zscore(
    lists: Mapping[str, Sequence[tuple[str, int, float]]], alpha: float, k: int
) -> list[tuple[str, float]]:
    """(record, chunk id, higher-is-better value) per leg -> each leg standardised over what it returned
    (population deviation), a record a leg lacks at that leg's lowest, alpha * semantic + (1 - alpha) *
    keyword; ties by the best rank, then the shown chunk's id. Written with numpy, apart from the product."""
    z: dict[str, dict[str, float]] = {}
    lowest: dict[str, float] = {}
    best: dict[str, tuple[int, int]] = {}
    for leg, ranked in lists.items():
        values = np.array([v for _, _, v in ranked], dtype=np.float64)
        spread = values.std() if len(values) else 0.0
        scaled = (values - values.mean()) / spread if spread > 0 else np.zeros(len(values))
        z[leg] = {record: float(x) for (record, _, _), x in zip(ranked, scaled, strict=True)}
        lowest[leg] = float(scaled.min()) if len(values) else 0.0
        for rank, (record, chunk_id, _) in enumerate(ranked, 1):
            best[record] = min(best.get(record, (rank, chunk_id)), (rank, chunk_id))
    share = {"semantic": alpha, "keyword": 1.0 - alpha}
    score = {r: sum(share[leg] * z[leg].get(r, lowest[leg]) for leg in lists) for r in best}
    order = sorted(score, key=lambda r: (-score[r], best[r]))[:k]
    return [(r, score[r]) for r in order]


def test_hybrid_is_the_zscore_fusion_of_keyword_and_first_window_lists(indexed) -> None:
    system = indexed(hybrid_depth=6, hybrid_fusion="ZSCORE")
    try:
        retriever = system.retriever()
        for question in QUESTIONS:
            with system.engine.connect() as conn:
                query = np.frombuffer(
                    bytes(
                        conn.exec_driver_sql(
                            "SELECT vector_embedding(?)", (embed_text(question),)
                        ).scalar_one()
                    ),
                    dtype="<f4",
                )
                vectors = {
                    s: (c, np.frombuffer(bytes(b), dtype="<f4")) for c, s, b in conn.execute(FIRST_CHUNKS)
                }
            dense = [
                (
                    s,
                    c,
                    -(
                        1.0
                        - float(v.astype(np.float64) @ query.astype(np.float64))
                        / (np.linalg.norm(v) * np.linalg.norm(query))
                    ),
                )
                for s, (c, v) in vectors.items()
            ]
            dense = sorted(dense, key=lambda x: (-x[2], x[1]))[:6]
            keyword = [
                (h.source_id, vectors[h.source_id][0], h.score)
                for h in retriever.search(question, 6, MANAGER, "keyword")
            ]
            want = _reference_zscore({"semantic": dense, "keyword": keyword}, system.settings.hybrid_alpha, 5)
            got = retriever.search(question, 5, MANAGER, "hybrid")
            assert [h.source_id for h in got] == [r for r, _ in want], question
            assert [h.score for h in got] == pytest.approx([s for _, s in want], abs=1e-4), question
    finally:
        system.close()


def test_only_the_near_ties_that_can_reach_the_zscore_top_k_need_sqls_distances() -> None:
    """ScoreFusion.runs_that_matter: settling just the runs it names gives the top k of the legs with
    SQL's distances (the cache's differ by a hair), and most runs need no settling."""
    from oracle_rag.engines import Hit
    from oracle_rag.search.fusion import ScoreFusion

    rng = np.random.default_rng(31)
    skipped = total = 0
    for trial in range(300):
        truth, proposed, runs, keyword = _near_tie_case(rng)
        k = int(rng.integers(1, 11))
        # the cache's distances: SQL's within a hair, in the run's positions as the cache ordered them
        cached = [
            Hit(h.chunk_id, h.source_type, h.source_id, "", h.score + float(rng.uniform(-2e-6, 2e-6)))
            for h in proposed
        ]
        alpha = float(rng.uniform(0.2, 0.9))
        want = [
            (r.source_type, r.source_id)
            for r in ScoreFusion({"semantic": truth, "keyword": keyword}, alpha).top(k)
        ]
        needed = ScoreFusion({"semantic": cached, "keyword": keyword}, alpha).runs_that_matter(runs, k)
        settled = list(cached)
        for a, b in needed:
            settled[a:b] = truth[a:b]
        got = ScoreFusion({"semantic": settled, "keyword": keyword}, alpha).top(k)
        assert [(r.source_type, r.source_id) for r in got] == want, trial
        skipped += len(runs) - len(needed)
        total += len(runs)
    assert skipped > total // 2
