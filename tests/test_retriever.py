"""The read path: scope in SQL before top-k, filters, hostile query text, RRF.

Runs on the shared demo data (300 tasks, 48 sprints, 6 projects, indexed).
Visibility is recomputed here in SQL from the reference tables (TASK's
assignee, EMPLOYEE's role), not from RAG_CHUNK.OWNER_ID and not with the
product's scope predicate, so a wrong predicate cannot agree with itself.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from model_helpers import link_model

from oracle_rag.callers.access import load_caller
from oracle_rag.callers.caller import Caller
from oracle_rag.config import load_settings
from oracle_rag.engines import Filters, Hit
from oracle_rag.errors import AccessError, InputError
from oracle_rag.search.fusion import rrf
from oracle_rag.search.hybrid import semantic_leg_filters
from oracle_rag.search.results import RetrievedChunk
from oracle_rag.search.retriever import MODES, Retriever, clean_query
from oracle_rag.system import RagSystem
from oracle_rag.text.bm25 import query_terms

VOCABULARY = [
    "invoice",
    "payment",
    "login",
    "timeout",
    "mobile",
    "Kubernetes",
    "facturas",
    "sprint",
    "PDF",
    "retry",
    "dashboard",
    "sincronización",
    "GDPR",
    "SSO",
    "blocked",
    "release",
    "Atlas",
    "Nova",
    "Helios",
    "audit",
    "notificaciones",
    "exchange rates",
    "Sprint 12",
    "goal",
    "project",
]

# Visible chunk ids for an employee, from the reference tables: managers and
# admins see every chunk; everyone sees sprint and project chunks; a task
# chunk only for the task's assignee.
VISIBLE = sa.text("""SELECT c.CHUNK_ID
FROM RAG_CHUNK c
JOIN EMPLOYEE e ON e.EMPLOYEE_ID = :emp
LEFT JOIN TASK t ON c.SOURCE_TYPE = 'TASK' AND t.TASK_ID = CAST(c.SOURCE_ID AS INTEGER)
WHERE (e.ROLE IN ('manager', 'admin') OR c.SOURCE_TYPE IN ('SPRINT', 'PROJECT') OR t.ASSIGNEE_ID = e.EMPLOYEE_ID)
  AND (:project IS NULL OR c.PROJECT_ID = :project)
  AND (:sprint IS NULL OR c.SPRINT_ID = :sprint)""")
# Records holding a query term (their postings live on chunk 0): what keyword search can return.
TERM_MATCHES = sa.text("SELECT DISTINCT CHUNK_ID FROM RAG_CHUNK_TERM WHERE TERM IN :terms").bindparams(
    sa.bindparam("terms", expanding=True)
)
CHUNK_ROWS = sa.text(
    "SELECT CHUNK_ID, SOURCE_TYPE, SOURCE_ID, PROJECT_ID, SPRINT_ID, EMBEDDING FROM RAG_CHUNK"
)
TASK_ASSIGNEE = sa.text("SELECT TASK_ID, ASSIGNEE_ID FROM TASK")


@pytest.fixture(scope="module")
def demo(tmp_path_factory, demo_template: Path, model_path: Path):
    """One read-only indexed demo system for the module (searches never write)."""
    d = tmp_path_factory.mktemp("retriever")
    link_model(model_path, d)
    shutil.copyfile(demo_template, d / "oracle-rag.db")
    system = RagSystem(load_settings(env={}, data_dir=str(d)))
    with system.engine.connect() as conn:
        chunks = {int(r[0]): r for r in conn.execute(CHUNK_ROWS)}
        assignee = {int(r[0]): r[1] for r in conn.execute(TASK_ASSIGNEE)}
        callers = {i: load_caller(conn, i) for i in range(1, 41)}
    system.chunks = chunks  # type: ignore[attr-defined]
    system.assignee = assignee  # type: ignore[attr-defined]
    system.callers = callers  # type: ignore[attr-defined]
    yield system
    system.close()


@pytest.fixture(scope="module")
def retriever(demo) -> Retriever:
    return demo.retriever()


def wanted(filters: Filters, facet: str) -> int | None:
    """The value a search narrowed by ``facet`` (an indexed facet) must have, None when not narrowed."""
    return dict(filters.facets).get(facet)


def visible_ids(demo, caller: Caller, filters: Filters) -> set[int]:
    with demo.engine.connect() as conn:
        rows = conn.execute(
            VISIBLE,
            {
                "emp": caller.employee_id,
                "project": wanted(filters, "project_id"),
                "sprint": wanted(filters, "sprint_id"),
            },
        )
        ids = {int(r[0]) for r in rows}
    if filters.source_types:
        ids = {i for i in ids if demo.chunks[i][1] in filters.source_types}
    return ids


def keyword_matches(demo, text: str) -> set[int]:
    terms = query_terms(text)
    if not terms:
        return set()
    with demo.engine.connect() as conn:
        return {int(r[0]) for r in conn.execute(TERM_MATCHES, {"terms": sorted(terms)})}


def records(demo, chunk_ids: set[int]) -> set[tuple[str, str]]:
    return {(demo.chunks[i][1], demo.chunks[i][2]) for i in chunk_ids}


def check_result(demo, caller: Caller, results: list[RetrievedChunk], filters: Filters, k: int) -> None:
    """What every search result must satisfy, whatever the mode and the query."""
    allowed = visible_ids(demo, caller, filters)
    ids = [r.chunk_id for r in results]
    assert len(ids) == len(set(ids)), "a chunk came back twice"
    assert [r.rank for r in results] == list(range(1, len(results) + 1))
    assert len(results) <= k
    for r in results:
        assert r.chunk_id in allowed, f"{caller} received chunk {r.chunk_id} ({r.anchor}) outside their scope"
        stored = demo.chunks[r.chunk_id]
        assert (r.source_type, r.source_id) == (stored[1], stored[2])
        if r.source_type == "TASK" and not caller.sees_all:
            assert demo.assignee[int(r.source_id)] == caller.employee_id
        if wanted(filters, "project_id") is not None:
            assert stored[3] == wanted(filters, "project_id")
        if wanted(filters, "sprint_id") is not None:
            assert stored[4] == wanted(filters, "sprint_id")


# -- scope, property-based ------------------------------------------------------------
queries = st.one_of(
    st.tuples(st.lists(st.sampled_from(VOCABULARY), min_size=1, max_size=5), st.text(max_size=30)).map(
        lambda t: " ".join(t[0]) + " " + t[1]
    ),
    st.text(min_size=1, max_size=60),
).filter(lambda q: q.replace("\x00", " ").strip() != "")
filter_sets = st.one_of(
    st.none(),
    st.builds(
        Filters,
        project_id=st.one_of(st.none(), st.integers(1, 7)),
        sprint_id=st.one_of(st.none(), st.integers(1, 49)),
        source_types=st.sets(st.sampled_from(["TASK", "SPRINT", "PROJECT"])).map(lambda s: tuple(sorted(s))),
    ),
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    employee=st.integers(1, 40),
    query=queries,
    mode=st.sampled_from(MODES),
    k=st.integers(1, 100),
    filters=filter_sets,
)
def test_scope_holds_and_k_rows_come_back_when_visible(demo, retriever, employee, query, mode, k, filters):
    caller = demo.callers[employee]
    results = retriever.search(query, k, caller, mode, filters)
    f = filters or Filters()
    check_result(demo, caller, results, f, k)
    allowed = visible_ids(demo, caller, f)
    if mode == "keyword":
        expected = min(k, len(allowed & keyword_matches(demo, query)))
    else:  # every visible record is a semantic candidate, and hybrid's semantic leg fetches >= k
        expected = min(k, len(records(demo, allowed)))
    assert len(results) == expected


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(employee=st.integers(1, 40), query=queries, k=st.integers(1, 100))
def test_semantic_is_the_exact_top_k_of_the_visible_chunks(demo, retriever, employee, query, k):
    """Scope before top-k: no visible chunk closer than the k-th result is left out."""
    caller = demo.callers[employee]
    results = retriever.search(query, k, caller, "semantic")
    allowed = sorted(visible_ids(demo, caller, Filters()))
    with demo.engine.connect() as conn:
        q = np.asarray(demo.engine.embed(conn, query.replace("\x00", " ").strip()), dtype=np.float64)
    matrix = np.stack([np.frombuffer(demo.chunks[i][5], dtype="<f4") for i in allowed]).astype(np.float64)
    distances = dict(
        zip(allowed, 1.0 - matrix @ q / np.linalg.norm(matrix, axis=1) / np.linalg.norm(q), strict=True)
    )
    # a record ranks by its nearest chunk (a long comment thread makes a second chunk), once
    best: dict[tuple[str, str], float] = {}
    for i in allowed:
        key = (demo.chunks[i][1], demo.chunks[i][2])
        best[key] = min(best.get(key, 2.0), distances[i])
    got = {(demo.chunks[r.chunk_id][1], demo.chunks[r.chunk_id][2]) for r in results}
    assert len(results) == len(got) == min(k, len(best))
    for r in results:
        assert r.distance == pytest.approx(distances[r.chunk_id], abs=1e-5)
        assert r.distance == pytest.approx(
            best[(demo.chunks[r.chunk_id][1], demo.chunks[r.chunk_id][2])], abs=1e-5
        )
    assert [r.distance for r in results] == sorted(r.distance for r in results)  # type: ignore[type-var]
    left_out = [d for key, d in best.items() if key not in got]
    if left_out:
        assert max(r.distance for r in results) <= min(left_out) + 1e-5  # type: ignore[type-var]


def test_a_developer_gets_all_their_tasks_and_no_one_elses(demo, retriever):
    """Nine or so visible tasks among 300: a post-filtered top-k would return far fewer."""
    for employee in (9, 17, 40):
        caller = demo.callers[employee]
        own = sorted(t for t, a in demo.assignee.items() if a == employee)
        assert own, "the demo data gives every developer tasks"
        results = retriever.search("task", 100, caller, "semantic", Filters(source_types=("TASK",)))
        assert sorted(int(r.source_id) for r in results) == own
        assert all(r.owner_id == employee for r in results)


def test_managers_and_admins_see_everything_including_unassigned(demo, retriever):
    unassigned = {t for t, a in demo.assignee.items() if a is None}
    assert unassigned
    for employee in (1, 3):
        results = retriever.search(
            "task", 100, demo.callers[employee], "semantic", Filters(source_types=("TASK",))
        )
        assert len(results) == 100
    every_task = set()
    for project in range(1, 7):
        for mode in ("semantic", "hybrid"):
            res = retriever.search(
                "task", 100, demo.callers[3], mode, Filters(project_id=project, source_types=("TASK",))
            )
            every_task |= {int(r.source_id) for r in res}
    assert unassigned <= every_task
    for employee in range(9, 41):
        res = retriever.search(
            "unassigned", 100, demo.callers[employee], "semantic", Filters(source_types=("TASK",))
        )
        assert not unassigned & {int(r.source_id) for r in res}


def test_organisational_chunks_are_visible_to_every_developer(demo, retriever):
    for employee in (9, 25, 40):
        res = retriever.search(
            "sprint goal",
            100,
            demo.callers[employee],
            "semantic",
            Filters(source_types=("SPRINT", "PROJECT")),
        )
        assert len(res) == 54  # 48 sprints + 6 projects


# -- filters ---------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_filters_are_honoured(demo, retriever, mode):
    manager = demo.callers[3]
    for f in (
        Filters(project_id=2),
        Filters(sprint_id=5),
        Filters(source_types=("SPRINT",)),
        Filters(project_id=1, source_types=("TASK", "PROJECT")),
        Filters(project_id=1, sprint_id=30),
    ):
        res = retriever.search("invoice payment sprint project", 100, manager, mode, f)
        check_result(demo, manager, res, f, 100)
        if f.source_types:
            assert {r.source_type for r in res} <= set(f.source_types)
        if mode != "keyword":
            assert len(res) == min(100, len(visible_ids(demo, manager, f)))
    # project 1 has sprints 1-8 only: sprint 30 with project 1 is empty, not an error
    assert retriever.search("sprint", 10, manager, mode, Filters(project_id=1, sprint_id=30)) == []


# -- hostile query text -------------------------------------------------------------------
HOSTILE = [
    "invoice NEAR payment",
    "invoice AND payment",
    "invoice OR payment",
    "NOT invoice",
    "invoic*",
    "^invoice",
    "-invoice",
    '"invoice',
    'invoice"',
    "{invoice}",
    "(invoice",
    "invoice)",
    "CONTENT:invoice",
    "ABOUT(invoice)",
    "invoice%",
    "_invoice_",
    "invoice\\",
    "\\",
    "%",
    "*",
    '"',
    "'; DROP TABLE RAG_CHUNK; --",
    "x' OR '1'='1",
    "invoice\x00payment",
    "NEAR(invoice payment, 3)",
    "invoice^2 payment~",
    "$(rm -rf /)",
    "{{}}",
    "::",
    "ÁÉÍÓÚ ñ 日本語 🙂",
    "\u202eevil",
    "a" * 3000,
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("query", HOSTILE, ids=range(len(HOSTILE)))
def test_query_syntax_is_never_interpreted(demo, retriever, query, mode):
    """Operators, quotes and wildcards are text: a correct, scoped result, never a SQL error."""
    for employee in (3, 12):
        caller = demo.callers[employee]
        results = retriever.search(query, 8, caller, mode)  # raises nothing: these all have content
        check_result(demo, caller, results, Filters(), 8)
        if mode != "keyword":
            assert len(results) == 8


def test_operators_do_not_change_keyword_results(retriever, demo):
    manager = demo.callers[3]

    def ids(q: str) -> list[str]:
        return [r.source_id for r in retriever.search(q, 50, manager, "keyword")]

    plain = ids("invoice")
    assert plain
    assert ids("invoic*") == []  # a prefix query would have matched "invoice"
    for dressed in (
        '"invoice',
        "invoice*",
        "^invoice",
        "(invoice)",
        "{invoice}",
        "invoice%",
        "NOT invoice",
        "invoice AND the",
    ):
        assert ids(dressed) == plain, dressed
    # an operator that is also a word of the records ("tell them about the workaround") is searched as that word
    for dressed, words in (("ABOUT(invoice)", "about invoice"), ("CONTENT:invoice", "content invoice")):
        assert ids(dressed) == ids(words), dressed


@pytest.mark.parametrize("query", ["", "   ", "\x00", "\x00 \x00\t\n"])
@pytest.mark.parametrize("mode", MODES)
def test_empty_query_is_an_input_error(demo, retriever, query, mode):
    with pytest.raises(InputError, match="query is empty"):
        retriever.search(query, 8, demo.callers[9], mode)


@pytest.mark.parametrize("mode", MODES)
def test_a_100_kb_query(demo, retriever, mode):
    big = ("invoice payment retry " * 5000)[:100_000]
    with pytest.raises(InputError, match="max_question_chars"):
        retriever.search(big, 8, demo.callers[9], mode)
    # Allowed explicitly, it is searched (the semantic text is cut to 4000 bytes, keyword terms capped).
    res = retriever.search(big, 8, demo.callers[9], mode, max_chars=100_000)
    check_result(demo, demo.callers[9], res, Filters(), 8)
    assert res


def test_the_limit_counts_the_question_as_sent() -> None:
    """The API's schema declares ``maxLength`` on the question as sent: spaces around a question of the
    limit's length make it too long, as the contract says (a fuzzer found the two disagreeing)."""
    assert clean_query("  " + "a" * 10 + "  ", 14) == "a" * 10
    with pytest.raises(InputError, match="query is 15 characters; the limit is 14"):
        clean_query("   " + "a" * 10 + "  ", 14)


class _RecordingRuntime:
    """The real runtime, recording the texts SQL asks it to embed."""

    def __init__(self, real):
        self.real = real
        self.texts: list[str] = []

    def embed(self, text):
        self.texts.append(text)
        return self.real.embed(text)

    def __getattr__(self, name):
        return getattr(self.real, name)


def test_long_multibyte_query_is_embedded_as_its_first_4000_bytes(demo, retriever):
    text = "facturación " * 330  # 3960 characters (under max_question_chars), 4290 bytes in UTF-8
    real = demo.engine.runtime()
    recording = _RecordingRuntime(real)
    demo.engine.set_runtime(recording)
    try:
        long_res = retriever.search(text, 8, demo.callers[3], "semantic")
    finally:
        demo.engine.set_runtime(real)
    assert recording.texts and all(len(t.encode("utf-8")) <= 4000 for t in recording.texts)
    cut = text.strip().encode("utf-8")[:4000].decode("utf-8", errors="ignore")
    assert recording.texts == [cut]
    # 256 wordpieces end long before 4000 bytes: the cut does not change what is found.
    assert [r.chunk_id for r in long_res] == [r.chunk_id for r in retriever.search(cut, 8, demo.callers[3])]


# -- arguments ---------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 101, -1, "8", 8.0, 3.5, True, [8]])
def test_bad_k_is_an_input_error(demo, retriever, k):
    with pytest.raises(InputError, match="k must be an integer"):
        retriever.search("invoice", k, demo.callers[9])


def test_default_k_comes_from_settings(demo, retriever):
    assert len(retriever.search("invoice", None, demo.callers[3])) == demo.settings.top_k


@pytest.mark.parametrize("mode", ["", "SEMANTIC", "vector", "hybrid ", None])
def test_unknown_mode_is_an_input_error(demo, retriever, mode):
    with pytest.raises(InputError, match="mode must be one of"):
        retriever.search("invoice", 8, demo.callers[9], mode)


@pytest.mark.parametrize("caller", [None, 9, "9", {"employee_id": 9, "role": "manager"}])
def test_no_caller_is_refused(retriever, caller):
    with pytest.raises(AccessError, match="no authenticated caller"):
        retriever.search("invoice", 8, caller)


def test_non_string_query_is_an_input_error(demo, retriever):
    with pytest.raises(InputError, match="query must be a string"):
        retriever.search(b"invoice", 8, demo.callers[9])  # type: ignore[arg-type]


def test_a_role_outside_see_all_roles_sees_only_its_own():
    """Roles are the deployment's: any name is a role, and only see_all_roles read everything."""
    assert not Caller(9, "superuser").sees_all
    assert Caller(9, "superuser", see_all_roles=("superuser",)).sees_all
    for bad in ("", " ", "x" * 65, "a\nb"):
        with pytest.raises(AccessError):
            Caller(9, bad)
    with pytest.raises(AccessError):
        Caller(True, "manager")  # type: ignore[arg-type]


def test_stats_and_hybrid_fetch_depth(demo, retriever):
    manager = demo.callers[3]
    retriever.search("invoice payment", 8, manager, "hybrid")
    stats = retriever.last_stats
    assert stats is not None and stats.mode == "hybrid" and stats.k == 8
    assert stats.legs["semantic"] == max(8, demo.settings.hybrid_depth)
    assert 0 < stats.legs["keyword"] <= max(8, demo.settings.hybrid_depth)
    retriever.search("invoice", 100, manager, "hybrid")
    assert retriever.last_stats.legs["semantic"] == min(
        max(100, demo.settings.hybrid_depth), 400
    )  # capped at 4 x MAX_K


def test_hybrid_results_record_their_legs(demo, retriever):
    res = retriever.search("invoice PDF generation", 20, demo.callers[3], "hybrid")
    assert any(set(r.legs) == {"semantic", "keyword"} for r in res)
    for r in res:
        assert set(r.legs) <= {"semantic", "keyword"}
        assert (r.distance is not None) == ("semantic" in r.legs)
        assert (r.keyword_score is not None) == ("keyword" in r.legs)
    assert [r.score for r in res] == sorted((r.score for r in res), reverse=True)


def test_hybrid_fetches_text_for_the_fused_top_k_only_and_shows_the_same(demo, retriever):
    """The legs run without text, the fused top k get theirs; the result equals fusing
    full legs (same records, scores, legs, and the chunk, text and facets of the best leg)."""
    from oracle_rag.engines import KeywordHits, embed_text

    fetch = max(8, demo.settings.hybrid_depth)
    weights = {"semantic": demo.settings.semantic_weight, "keyword": demo.settings.keyword_weight}
    for question, caller in [
        ("invoice PDF generation", demo.callers[3]),
        ("sprint review demo", demo.callers[1]),
        ("login error after password reset", demo.callers[3]),
    ]:
        got = retriever.search(question, 8, caller, "hybrid")
        with demo.engine.connect() as conn:
            scope = caller.scope()
            light = demo.engine.keyword_search(conn, question, fetch, scope, Filters(), text=False)
            full = {
                "semantic": demo.engine.semantic_search(
                    conn, embed_text(question), fetch, scope, semantic_leg_filters(demo.settings, Filters())
                ),
                "keyword": demo.engine.keyword_search(conn, question, fetch, scope, Filters()),
            }
        assert isinstance(light, KeywordHits) and not any(h.content for h in light)
        want = rrf(full, 8, demo.settings.rrf_k, weights)
        assert got and all(r.content for r in got)
        assert [
            (r.source_type, r.source_id, r.chunk_id, r.chunk_no, r.content, r.facets, r.score, r.legs, r.rank)
            for r in got
        ] == [
            (r.source_type, r.source_id, r.chunk_id, r.chunk_no, r.content, r.facets, r.score, r.legs, r.rank)
            for r in want
        ], question


# -- RRF --------------------------------------------------------------------------------
def _hit(cid: int, score: float) -> Hit:
    return Hit(cid, "TASK", str(cid), f"chunk {cid}", score)


def test_rrf_by_hand():
    legs = {
        "semantic": [_hit(1, 0.10), _hit(2, 0.20), _hit(3, 0.30)],
        "keyword": [_hit(3, 9.0), _hit(4, 8.0), _hit(1, 7.0)],
    }
    fused = rrf(legs, 10, 60, {"semantic": 1.0, "keyword": 1.0})
    # 1: 1/61 + 1/63; 3: 1/63 + 1/61 (tie: best rank 1 for both, then chunk id); 2: 1/62; 4: 1/62
    assert [r.chunk_id for r in fused] == [1, 3, 2, 4]
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 63)
    assert fused[2].score == pytest.approx(1 / 62)
    assert [r.rank for r in fused] == [1, 2, 3, 4]
    assert fused[0].legs == ("semantic", "keyword") and fused[1].legs == ("semantic", "keyword")
    assert fused[2].legs == ("semantic",) and fused[3].legs == ("keyword",)
    assert (fused[0].distance, fused[0].keyword_score) == (0.10, 7.0)
    assert (fused[3].distance, fused[3].keyword_score) == (None, 8.0)


def test_rrf_weights_k_and_cut():
    legs = {"semantic": [_hit(1, 0.1), _hit(2, 0.2)], "keyword": [_hit(2, 5.0), _hit(1, 4.0)]}
    # Equal weights: 1 and 2 tie (1/61 + 1/62 each); chunk id breaks it.
    assert [r.chunk_id for r in rrf(legs, 10, 60, {})] == [1, 2]
    # Keyword weighted up: 2 (rank 1 there) wins.
    up = rrf(legs, 10, 60, {"semantic": 1.0, "keyword": 2.0})
    assert [r.chunk_id for r in up] == [2, 1]
    assert up[0].score == pytest.approx(1 / 62 + 2 / 61)
    # A zero weight removes a leg's influence but still records that it found the chunk.
    only_sem = rrf(legs, 10, 60, {"semantic": 1.0, "keyword": 0.0})
    assert [r.chunk_id for r in only_sem] == [1, 2] and only_sem[0].legs == ("semantic", "keyword")
    assert rrf(legs, 10, 1, {})[0].score == pytest.approx(1 / 2 + 1 / 3)
    assert len(rrf(legs, 1, 60, {})) == 1
    assert rrf({"semantic": [], "keyword": []}, 5, 60, {}) == []
