"""A CRM deployment with no reference application: every person question answered with names.

The world is bench/crm.py's (its own data: 400 deals owned by reps and shared
by team, account notes shared through an ACL, roles and teams from the
``[access]`` queries, names from ``[people]``, no EMPLOYEE table). Real parts:
the embedded engine with the real ONNX model, the SQL-query sources read and
embedded, the Chat's structured answers. The truth is computed in bench/crm.py
from the rows and the declared policy in plain Python.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from model_helpers import link_model

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
import crm  # noqa: E402


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, model_path: Path) -> Iterator[tuple[Any, crm.World]]:
    data = link_model(model_path, tmp_path_factory.mktemp("crm") / "data")
    rag, world = crm.build(data)
    yield rag, world
    rag.close()


@pytest.fixture(scope="module")
def answers(deployment: tuple[Any, crm.World]) -> list[dict[str, Any]]:
    rag, world = deployment
    return crm.ask_all(rag, world)


def _wrong(rows: list[dict[str, Any]]) -> str:
    return "\n".join(
        f"[{r['who']}] {r['question']}: {r['problem']} ids={r['ids_shown']}\n  {r['answer'][:300]!r}"
        for r in rows
    )


def test_there_is_no_reference_application(deployment: tuple[Any, crm.World]) -> None:
    rag, _ = deployment
    assert rag.sources.types() == []
    assert [d.source_type for d in rag.declarations()] == ["deals", "notes"]
    assert rag.status()["people"]["names_from"] == "[people] query"


def test_every_answer_is_right(answers: list[dict[str, Any]]) -> None:
    """Counts, filters (the exact total and the cited records), lookups and person questions."""
    assert {r["category"] for r in answers} == {"person", "count", "filter", "lookup"}
    wrong = [r for r in answers if not r["right"]]
    assert not wrong, _wrong(wrong)


def test_person_answers_show_names_never_a_named_persons_id(answers: list[dict[str, Any]]) -> None:
    person = [r for r in answers if r["person"]]
    assert len(person) >= 50
    shown = [r for r in answers if r["ids_shown"]]
    assert not shown, _wrong(shown)


def test_a_person_without_a_name_shows_as_the_id(answers: list[dict[str, Any]]) -> None:
    per_rep = next(r for r in answers if r["question"] == "deals per rep")
    lines = per_rep["answer"].splitlines()
    assert f"{crm.FORMER}: " in "\n".join(lines) and "Tomás Herrera: " in "\n".join(lines)


def test_a_typo_in_a_name_is_read_and_said(answers: list[dict[str, Any]]) -> None:
    typo = next(r for r in answers if r["question"] == "deals of Tomás Herera")
    assert typo["right"] and "Read as" in typo["answer"], typo["answer"]


def test_an_unknown_name_says_did_you_mean(deployment: tuple[Any, crm.World]) -> None:
    from oracle_rag.answering.chat import Chat

    rag, _ = deployment
    answer = Chat(rag, None, today=lambda: crm.TODAY).answer(
        "deals of Chloe Martn", rag_caller(rag, 9109), store=False
    )
    assert answer.answer.startswith("No rep named 'Chloe Martn' \u2014 did you mean Chloé Martin?\n"), (
        answer.answer
    )


def test_without_people_the_same_questions_show_ids(deployment: tuple[Any, crm.World]) -> None:
    """The baseline the bench measures: the same deployment without [people] answers with ids."""
    from oracle_rag.answering.chat import Chat
    from oracle_rag.config import load_settings
    from oracle_rag.system import RagSystem

    rag, world = deployment
    overrides = crm.settings_overrides(people=False)
    with RagSystem(load_settings(env={}, data_dir=rag.settings.data_dir, **overrides)) as bare:
        caller = rag_caller(bare, 9109)
        answer = Chat(bare, None, today=lambda: crm.TODAY).answer(
            "who has the most open deals?", caller, store=False
        )
    assert crm.ids_shown(answer.answer, world.names), answer.answer


def rag_caller(rag: Any, employee_id: int) -> Any:
    from oracle_rag.callers.access import load_caller

    with rag.engine.connect() as conn:
        return load_caller(conn, employee_id, rag.engine)


def test_an_average_with_a_model_is_answered_from_the_records_not_guarded_sql(
    deployment: tuple[Any, crm.World],
) -> None:
    """Guarded SQL reads the reference application's views; here there are none, so the model is never
    asked for SQL: the question is answered from the records (and without a model, it says why)."""
    from llm_server import ScriptedLLM

    from oracle_rag.answering.chat import Chat, LLMClient
    from oracle_rag.answering.chat.router import NO_GUARDED_VIEWS

    rag, _ = deployment
    caller = rag_caller(rag, 9109)
    question = "what is the average amount of won deals per region?"
    plain = Chat(rag, None, today=lambda: crm.TODAY).answer(question, caller, store=False)
    assert plain.answer.startswith(NO_GUARDED_VIEWS) and plain.aggregate is None, plain.answer
    with ScriptedLLM().start() as server:
        server.push_route('{"retrieval": false, "aggregation": true}')
        server.push("The records list the won deals' amounts.")
        settings = rag.settings.with_overrides(
            llm_url=server.url, llm_model="m", llm_api_key="k", llm_max_retries=0
        )
        chat = Chat(rag, LLMClient.from_settings(settings), settings=settings, today=lambda: crm.TODAY)
        answer = chat.answer(question, caller, store=False)
        assert answer.route == "retrieval" and answer.aggregate is None, answer.to_dict()
        assert answer.citations and all(c.source_type in ("deals", "notes") for c in answer.citations)
        assert not any("RAG_V_" in r.system for r in server.requests)  # never asked to write SQL
