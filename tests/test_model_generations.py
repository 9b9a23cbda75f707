"""Model generations: a switch fills a second model's vectors beside the active ones, a flip moves every
search to them at once, a rollback back, and no statement ever compares vectors of two models.

The second model is ``minilm-rotated`` (tests/generation_helpers.py): MiniLM with its outputs permuted,
so its rankings equal MiniLM's exactly among its own vectors and are noise against MiniLM's. After the
flip the demo's searches must return the old rankings (same records, same distances): a statement that
embedded the query with one model and compared it with the other's vectors could not.
"""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa
from generation_helpers import ROTATED_NAME, register
from writepath_helpers import set_title

from oracle_rag.callers.caller import Caller
from oracle_rag.engines import engine_sql as q
from oracle_rag.engines import generation_sql as gq
from oracle_rag.engines.generations import Generation, render
from oracle_rag.engines.records import Filters, Scope
from oracle_rag.engines.statements import Sql
from oracle_rag.errors import ConfigurationError, InputError
from oracle_rag.indexing import model_switch

QUESTIONS = [
    "login timeout on the mobile app",
    "SSO with Azure AD",
    "database migration fails",
    "improve dashboard performance",
    "error al iniciar sesión",
]
ADMIN = Caller(1, "admin")


@pytest.fixture(autouse=True)
def rotated_model() -> None:
    register()


def rankings(rag, mode: str = "semantic") -> dict[str, list[tuple[str, str, float]]]:
    retriever = rag.retriever()
    return {
        question: [
            (h.source_type, h.source_id, round(h.score, 4))
            for h in retriever.search(question, top_k=8, caller=ADMIN, mode=mode)
        ]
        for question in QUESTIONS
    }


def stamps(rag, source_id: str) -> list[tuple[int | None, int | None]]:
    with rag.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(
                sa.text(
                    "SELECT EMBEDDING_GEN, EMBEDDING_2_GEN FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = :i"
                ),
                {"i": source_id},
            )
        ]


def fill(rag) -> None:
    worker = rag.worker()
    while not worker.run_once().idle:
        pass


def test_switch_fill_activate_rollback_drop(demo_rag) -> None:
    rag = demo_rag
    with rag.engine.connect() as conn:
        total = rag.engine.chunk_total(conn)
    assert "generation 2: minilm-rotated in slot 2" in model_switch.switch(
        rag.engine, rag.settings, ROTATED_NAME
    )
    rotated = rag.engine.runtime_for(ROTATED_NAME)
    calls_after_load = rotated.calls
    progress = rag.status()["model_switch"]
    assert progress == {
        "to": ROTATED_NAME,
        "generation": 2,
        "state": "STANDBY",
        "from": "all-MiniLM-L6-v2",
        "embedded": 0,
        "chunks": total,
        "missing": total,
        "done": False,
    }
    with pytest.raises(InputError, match=f"lacks vectors for {total} of {total} chunks"):
        model_switch.activate(rag.engine)

    # A live write while the switch runs: its record gets both generations' vectors from the queue, first.
    with rag.engine.begin() as conn:
        set_title(conn, 7, "Rotate the signing keys of the payment gateway")
    first = rag.worker().run_once()
    assert first.picked == 1 and first.filled == 0
    assert stamps(rag, "7") and all(s == (1, 2) for s in stamps(rag, "7"))
    fill(rag)
    assert rag.status()["model_switch"]["done"] is True
    # Every chunk embedded once by the new model: the edited record by its write, the rest by the fill.
    assert rotated.calls - calls_after_load == total

    before = rankings(rag)  # the edit changed task 7: the reference is taken after it
    assert "active: minilm-rotated (generation 2)" in model_switch.activate(rag.engine)
    assert rag.status()["model_switch"] is None
    after = rankings(rag)
    assert after == before  # same records, same distances: queries embedded by the model of the vectors

    # While generation 2 is active, generation 1 is still written: a rollback finds this edit.
    with rag.engine.begin() as conn:
        set_title(conn, 8, "Quarterly llama census for the zoo")
    fill(rag)
    assert all(s == (1, 2) for s in stamps(rag, "8"))
    assert "rolled back; active: all-MiniLM-L6-v2 (generation 1)" in model_switch.rollback(rag.engine)
    top = rag.retriever().search("llama census", top_k=1, caller=ADMIN)[0]
    assert (top.source_type, top.source_id) == ("TASK", "8")

    assert "dropped minilm-rotated (generation 2)" in model_switch.drop(rag.engine, ROTATED_NAME)
    with rag.engine.connect() as conn:
        assert [g.model_name for g in rag.engine.generations(conn)] == ["all-MiniLM-L6-v2"]
    # The slot is reused: the old vectors there carry generation 2's stamp, so all are missing again.
    model_switch.switch(rag.engine, rag.settings, ROTATED_NAME)
    with rag.engine.connect() as conn:
        gen = next(g for g in rag.engine.generations(conn) if g.model_name == ROTATED_NAME)
        assert gen.generation_id == 3 and rag.engine.missing_vectors(conn, gen) == total


def test_keyword_search_and_active_model_untouched_by_a_switch(demo_rag) -> None:
    rag = demo_rag
    keyword, semantic = rankings(rag, "keyword"), rankings(rag)
    model_switch.switch(rag.engine, rag.settings, ROTATED_NAME)
    fill(rag)
    assert rankings(rag, "keyword") == keyword and rankings(rag) == semantic
    model_switch.activate(rag.engine)
    assert rankings(rag, "keyword") == keyword


def test_a_search_mixing_two_models_would_show(demo_rag) -> None:
    """The check above can fail: MiniLM's query vector against the rotated generation ranks otherwise."""
    rag = demo_rag
    before = rankings(rag)
    model_switch.switch(rag.engine, rag.settings, ROTATED_NAME)
    fill(rag)
    model_switch.activate(rag.engine)
    minilm = rag.engine.runtime()
    mixed = {}
    with rag.engine.connect() as conn:
        for question in QUESTIONS:
            qblob = minilm.to_blob(minilm.embed(question))
            found = rag.engine.semantic_search_by_vector(conn, qblob, 8, Scope(1, True), Filters())
            mixed[question] = [(h.source_type, h.source_id, round(h.score, 4)) for h in found]
    assert all(mixed[question] != before[question] for question in QUESTIONS)


def test_no_statement_can_compare_two_generations() -> None:
    one = Generation(1, "all-MiniLM-L6-v2", "ALL_MINILM_L12_V2", None, 384, 1, "ACTIVE")
    two = Generation(2, ROTATED_NAME, "MINILM_ROTATED", None, 384, 2, "STANDBY")
    from oracle_rag.config import load_settings
    from oracle_rag.engines.sqlite.engine import SqliteEngine

    engine = SqliteEngine(load_settings(env={}))
    with pytest.raises(ValueError, match="needs a model generation"):
        engine.text(q.SEMANTIC_SEARCH)
    text = engine.text(q.SEMANTIC_SEARCH, two)
    assert "EMBEDDING_2" in text and f"'{ROTATED_NAME}'" in text and "c.EMBEDDING," not in text
    # A template that names a vector column itself, beside the placeholder, is refused for either generation.
    crafted = Sql(
        sqlite="SELECT vec_distance_cosine(c.{embedding}, c.EMBEDDING_2), vector_embedding({model}, :q) "
        "FROM RAG_CHUNK c"
    )
    for gen in (one, two):
        with pytest.raises(ConfigurationError, match="names a vector column itself"):
            engine.text(crafted, gen)
    with pytest.raises(ConfigurationError):
        render("SELECT EMBEDDING FROM RAG_CHUNK WHERE {embedding}_GEN = 2", two, "oracle")
    # Every statement that embeds or compares vectors reads them through the placeholders only.
    import re

    vector_word = re.compile(r"vec_distance_cosine|VECTOR_DISTANCE|vector_embedding|VECTOR_EMBEDDING")
    for module in (q, gq):
        for name, value in vars(module).items():
            if not isinstance(value, Sql) or name in ("UPSERT_CHUNK",):
                continue
            for side in (value.oracle, value.sqlite):
                if side and vector_word.search(side):
                    assert not re.search(r"\bEMBEDDING(_2)?\b", side), (
                        f"{name} names a vector column directly"
                    )


def test_a_model_with_prefixes_gets_them_on_passages_and_queries(demo_rag) -> None:
    """e5 style: 'passage: ' before every stored chunk the model embeds, 'query: ' before the question."""
    from generation_helpers import PREFIXED_NAME, register_prefixed, rotate

    rag = demo_rag
    register_prefixed()
    model_switch.switch(rag.engine, rag.settings, PREFIXED_NAME)
    fill(rag)
    model_switch.activate(rag.engine)
    minilm = rag.engine.runtime()
    with rag.engine.connect() as conn:
        content, stored = conn.execute(
            sa.text(
                "SELECT CONTENT, EMBEDDING_2 FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = '3'"
            )
        ).first()
        query = rag.engine.embed(conn, "payment retry logic")
    assert np.allclose(np.frombuffer(stored, "<f4"), rotate(minilm.embed("passage: " + content)), atol=1e-5)
    assert np.allclose(query, rotate(minilm.embed("query: payment retry logic")), atol=1e-5)
    assert not np.allclose(query, rotate(minilm.embed("payment retry logic")), atol=1e-3)


def test_the_model_commands(demo_rag, cli) -> None:
    switched = cli("model", "switch", "--to", ROTATED_NAME)
    assert switched.exit_code == 0, switched.output
    assert "generation 2: minilm-rotated in slot 2" in switched.output
    refused = cli("model", "activate")
    assert refused.exit_code != 0 and "lacks vectors for" in refused.output
    listed = cli("model", "generations")
    assert listed.exit_code == 0
    assert [line.split()[:3] for line in listed.output.splitlines()] == [
        ["1", "all-MiniLM-L6-v2", "ACTIVE"],
        ["2", ROTATED_NAME, "STANDBY"],
    ]
    fill(demo_rag)
    assert "active: minilm-rotated" in cli("model", "activate").output
    assert "rolled back" in cli("model", "rollback").output
    dropped = cli("model", "drop", ROTATED_NAME)
    assert dropped.exit_code == 0 and "slot 2 is free" in dropped.output
    assert "unknown embedding model" in cli("model", "switch", "--to", "no-such-model").output


def test_progress_on_healthz_and_answers_and_access_unchanged(demo_rag, client) -> None:
    """/healthz reports the switch; a developer's searches and structured answers are the same after the flip."""
    import datetime as dt

    from oracle_rag.answering.chat import Chat
    from oracle_rag.callers.access import load_caller

    rag = demo_rag
    with rag.engine.connect() as conn:
        developer = load_caller(conn, 9)
    chat = Chat(rag, None, today=lambda: dt.date(2026, 3, 11))

    def seen() -> tuple[object, ...]:
        retriever = rag.retriever()
        searches = tuple(
            tuple(
                (h.source_type, h.source_id, round(h.score, 4))
                for h in retriever.search(q, top_k=8, caller=developer)
            )
            for q in QUESTIONS
        )
        answers = tuple(
            chat.answer(q, developer, store=False).answer
            for q in ("how many tasks are blocked?", "¿cuántas tareas en progreso hay por proyecto?")
        )
        return searches, answers

    before = seen()
    assert client.get("/healthz").get_json()["model_switch"] is None
    model_switch.switch(rag.engine, rag.settings, ROTATED_NAME)
    during = client.get("/healthz").get_json()["model_switch"]
    assert during["to"] == ROTATED_NAME and during["embedded"] == 0 and during["done"] is False
    fill(rag)
    assert client.get("/healthz").get_json()["model_switch"]["done"] is True
    model_switch.activate(rag.engine)
    health = client.get("/healthz").get_json()
    assert health["model_switch"] is None and health["model"]["name"].startswith(ROTATED_NAME)
    assert seen() == before
