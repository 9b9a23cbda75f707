"""The model's prose is checked sentence by sentence (oracle_rag.answering.chat.checking).

Unit part: the checks on a vocabulary built from the reference sources' own
facet declarations (no facet is described here). End-to-end part: the demo
database and the scripted OpenAI-protocol server replying adversarially, the
way a small local model was measured to (wrong counts, invented anchors,
wrong statuses, Spanish number words).
"""

from __future__ import annotations

import datetime as dt
import re

import pytest
import sqlalchemy as sa
from chat_helpers import DEV_A, MANAGER
from llm_server import Reply, ScriptedLLM

from oracle_rag.answering.chat import Chat, LLMClient
from oracle_rag.answering.chat.checking import (
    SentenceChecker,
    check_text,
    evidence_from,
    split_sentences,
)
from oracle_rag.answering.structured.vocabulary import build_vocabulary
from oracle_rag.callers.access import load_caller
from oracle_rag.sources.meanings import Declaration
from oracle_rag.sources.reference import TaskSource

TODAY = dt.date(2026, 3, 11)


@pytest.fixture(scope="module")
def evidence():
    vocab = build_vocabulary(
        [Declaration("TASK", tuple(TaskSource.facets), TaskSource.meanings)],
        {"status": {"TODO", "BLOCKED", "DONE"}, "priority": {"HIGH", "LOW", "CRITICAL"}},
        {"assignee_id": {9: "Ana Ruiz", 10: "Bob Lee"}},
    )
    records = {
        ("TASK", "23"): ({"status": "TODO", "priority": "HIGH", "assignee_id": 9}, "Fix login timeout"),
        ("TASK", "41"): ({"status": "BLOCKED", "priority": "LOW", "assignee_id": 10}, "Invoice export"),
    }
    shown = (
        "35 tasks match status: BLOCKED; the first 20 in id order:\n1. [TASK #23] Fix login timeout \u2014 TODO \u00b7 HIGH \u00b7 due "
        "2026-03-14\n2. [TASK #41] Invoice export \u2014 BLOCKED \u00b7 LOW\n   estimate 6.507 hours"
    )
    return evidence_from([shown], counts=[35, 20], records=records, vocab=vocab)


@pytest.mark.parametrize(
    "sentence",
    [
        "There are 35 of them.",
        "[TASK #41] is blocked waiting for the invoice service.",
        "[TASK #23] is not done yet and is due 2026-03-14.",
        "Ana Ruiz owns [TASK #23].",
        "The estimate of [TASK #41] is about 6.51 hours.",
        "Treinta y cinco tareas coinciden.",
        "Fix login timeout [TASK #23] is the one to start with.",
        "The service is written in C# and F# by the team.",  # not anchors
    ],
)
def test_supported_sentences_pass(evidence, sentence):
    text, tally = check_text(sentence, evidence)
    assert text == sentence and tally.to_dict() == {"sentences": 1, "removed": 0}


@pytest.mark.parametrize(
    ("sentence", "reason"),
    [
        ("There are two tasks.", "count"),  # computed: 35
        ("You have 21 overdue tasks.", "number"),
        ("There are no critical tasks.", "count"),
        ("Tengo veintidós tareas.", "number"),
        ("The team completed the login fix [TASK #23].", "facet"),  # #23 is TODO
        ("[TASK #23] is blocked.", "facet"),
        ("[TASK #41] is not blocked.", "facet"),
        ("Bob Lee is working on [TASK #23].", "facet"),  # #23 is Ana Ruiz's
        ("See [TASK #55] for details.", "anchor"),  # not given to the model
        ("It is tracked as [TODO #572].", "anchor"),
        (
            "[PROJECT #Plataforma Clientes] [TASK #23] is overdue.",
            "anchor",
        ),  # an id without a digit is one too
        ("It belongs to PROJECT #Atlas.", "anchor"),
        ("Task 99 is related.", "anchor"),
        ("A leftover [reference removed] here.", "removed"),
        ("[TASK #23] is due 2026-04-01.", "number"),
    ],
)
def test_unsupported_sentences_are_removed_whole(evidence, sentence, reason):
    from oracle_rag.answering.chat.checking import check_sentence

    verdict = check_sentence(sentence, evidence)
    assert not verdict.ok and verdict.reason == reason
    text, tally = check_text(f"[TASK #41] is blocked. {sentence}", evidence)
    assert text == "[TASK #41] is blocked." and tally.to_dict() == {"sentences": 2, "removed": 1}


def test_topic_sentences_need_a_citation_of_a_given_passage(evidence):
    from dataclasses import replace

    topic = replace(evidence, cite=True)
    text, tally = check_text(
        "The export fails on large files [TASK #41]. It also affects payroll exports "
        "every month. The records do not say more.",
        topic,
    )
    assert text == "The export fails on large files [TASK #41]. The records do not say more."
    assert (tally.removed, tally.cited) == (1, 1)


def test_a_numbered_list_marker_is_not_a_number_stated(evidence):
    """A topic answer listed as "1. [TASK #41] ...": the marker stays with its item and is not checked."""
    text = "7. [TASK #41] Export fails.\n8. [TASK #23] Login fix.\n9. See [TASK #55]."
    assert split_sentences(text) == [
        "7. [TASK #41] Export fails.\n",
        "8. [TASK #23] Login fix.\n",
        "9. See [TASK #55].",
    ]
    kept, tally = check_text(text, evidence)
    assert kept == "7. [TASK #41] Export fails.\n8. [TASK #23] Login fix." and tally.to_dict() == {
        "sentences": 3,
        "removed": 1,
    }


def test_sentences_and_streams_agree(evidence):
    text = "First about [TASK #41]. [TASK #23]\nSecond line with 999 items! Third is fine."
    assert split_sentences(text) == [
        "First about [TASK #41]. [TASK #23]\n",
        "Second line with 999 items! ",
        "Third is fine.",
    ]
    whole, tally = check_text(text, evidence)
    for size in (1, 3, 7):
        checker = SentenceChecker(evidence)
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        assert "".join(checker.feed(pieces)).strip() == whole
        assert checker.tally.to_dict() == tally.to_dict() == {"sentences": 3, "removed": 1}


# -- end to end: demo database, scripted model ------------------------------------------------
def _who(rag, employee_id):
    with rag.engine.connect() as conn:
        return load_caller(conn, employee_id)


def _chat(rag, llm: ScriptedLLM, **overrides) -> Chat:
    settings = rag.settings.with_overrides(llm_url=llm.url, llm_model="m", llm_max_retries=0, **overrides)
    return Chat(rag, LLMClient(settings, sleep=lambda s: None), settings=settings, today=lambda: TODAY)


def _status(rag, task_id: str) -> str:
    with rag.engine.connect() as conn:
        return str(
            conn.execute(
                sa.text("SELECT STATUS FROM TASK WHERE TASK_ID = :i"), {"i": int(task_id)}
            ).scalar_one()
        )


def test_adversarial_model_never_changes_what_sql_computed(demo_rag):
    manager = _who(demo_rag, MANAGER)
    plain = Chat(demo_rag, None, today=lambda: TODAY).answer(
        "how many critical tasks are not done?", manager, store=False
    )
    total = plain.structured["total"]
    with ScriptedLLM() as llm:
        chat = _chat(demo_rag, llm)
        llm.push(
            f"There are {total + 2} critical tasks. No, there are no critical tasks at all. "
            "See [TASK #999999] and [TODO #572]."
        )
        answer = chat.answer("how many critical tasks are not done?", manager, store=False)
        assert answer.answer == plain.answer  # every sentence removed: the structured part alone
        assert answer.checked == {"sentences": 3, "removed": 3} and answer.answerer == "llm"
        sent = llm.requests[0].last_user
        assert f'"total": {total}' in sent and "do not restate counts" in llm.requests[0].system

        listed = Chat(demo_rag, None, today=lambda: TODAY).answer(
            "which tasks are blocked?", manager, store=False
        )
        first = listed.structured["records"][0]["source_id"]
        title = listed.structured["records"][0]["title"]
        wrong = next(s for s in ("DONE", "TODO") if s != _status(demo_rag, first))
        # the record's text says nothing of a dependency: a valid anchor on a claim it does not support
        llm.push(
            f"[TASK #{first}] {title} is blocked. [TASK #{first}] is blocked by a dependency on the vendor. "
            f"[TASK #{first}] is {wrong.lower()}. Tengo noventa y nueve tareas bloqueadas."
        )
        answer = chat.answer("which tasks are blocked?", manager, store=False)
        assert answer.answer == listed.answer + f"\n\n[TASK #{first}] {title} is blocked."
        assert answer.checked == {"sentences": 4, "removed": 3}


def test_topic_answer_without_support_falls_back_to_the_extractive_answer(demo_rag):
    dev = _who(demo_rag, DEV_A)
    with ScriptedLLM() as llm:
        llm.push(
            "The deployment was completed last week by the platform team without issues. "
            "Everything is green now [TASK #55]."
        )
        answer = _chat(demo_rag, llm).answer("Kubernetes liveness probes", dev, store=False)  # one of theirs
    assert answer.answerer == "extractive" and answer.checked == {"sentences": 2, "removed": 2}
    assert answer.answer.startswith("The language model's answer could not be checked")
    assert answer.citations and all(c.anchor in answer.answer for c in answer.citations)


def test_the_structured_part_streams_before_the_model_is_asked(demo_rag):
    manager = _who(demo_rag, MANAGER)
    with ScriptedLLM() as llm:
        chat = _chat(demo_rag, llm)
        llm.push(Reply(text="x", pieces=["All of them ", "are blocked. ", "There are 4242 tasks."]))
        events = iter(chat.stream("which tasks are blocked?", manager, store=False))
        head = next(events)
        assert head.kind == "token" and re.match(r"\d+ tasks match", head.text)
        assert llm.requests == []  # the first token did not wait for the model
        rest = list(events)
        assert [e.text for e in rest if e.kind == "token"] == ["\n\nAll of them are blocked."]
        assert rest[-1].answer is not None and rest[-1].answer.checked == {"sentences": 2, "removed": 1}


def test_a_model_that_times_out_leaves_the_structured_part(demo_rag):
    manager = _who(demo_rag, MANAGER)
    with ScriptedLLM() as llm:
        llm.push(Reply(text="late", delay_s=30))
        events = list(
            _chat(demo_rag, llm, llm_timeout_s=0.5).stream("which tasks are blocked?", manager, store=False)
        )
    done = events[-1].answer
    assert events[-1].kind == "done" and done is not None
    assert done.answer.endswith(
        "(the language model did not answer within 0.5 s (llm_timeout_s); "
        "the answer above is computed from the data.)"
    )
    assert done.checked is not None and "did not answer" in done.checked["model_error"]
    assert done.structured is not None and done.citations


def test_a_sentence_repeating_a_computed_line_is_removed(evidence):
    from dataclasses import replace

    from oracle_rag.answering.chat.checking import check_sentence

    shown = replace(evidence, shown=frozenset({"critical: 18", "high: 53"}))
    assert check_sentence("- CRITICAL: 18\n", shown).reason == "repeat"
    assert check_sentence("Most of them are critical: 35 in all.", shown).ok


# -- claims: a sentence naming a record is supported by a passage of that record's text --------------
TICKETS = {
    ("TICKETS", "4001"): "SSO upgrade to the new SAML connector is stuck\n"
    "We planned to move our tenant to the new SAML connector (v3) this week, but the upgrade "
    "wizard stops at step 4.\nComments:\n"
    "- Raúl Domínguez (2026-02-04): The upgrade is blocked because your ADFS still signs "
    "assertions with SHA-1, and connector v3 only accepts SHA-256 signatures. There is nothing "
    "we can relax on our side.\n"
    "- Carla Mendes (2026-02-05): Our AD team can only change the signing algorithm in the "
    "maintenance window on March 14.",
    ("TICKETS", "4003"): "Export workers crash with too many open files\n"
    "Since release 2.14 the CSV export workers crash after about 40 minutes.\nComments:\n"
    "- Priya Natarajan (2026-02-10): Root cause: the storage client in 2.14 opens a new "
    "connection pool for every exported file and never closes it.\n"
    "- Jonas Berg (2026-02-10): Workaround until the fix ships: raise the file limit to 65536 "
    "and restart the export workers every 6 hours.\n"
    "- Priya Natarajan (2026-02-13): Fixed in 2.14.2, without user impact.",
}


def _claims(embed=None):
    records = {k: ({}, v.split("\n", 1)[0]) for k, v in TICKETS.items()}
    return evidence_from(
        list(TICKETS.values()), records=records, cite=True, record_texts=TICKETS, embed=embed
    )


@pytest.mark.parametrize(
    "sentence",
    [
        "The SSO upgrade is blocked because the ADFS still signs assertions with SHA-1 [TICKETS #4001].",
        "Raúl Domínguez explained that connector v3 only accepts SHA-256 signatures [TICKETS #4001].",
        "Carla Mendes said the signing algorithm can only change in the maintenance window on March 14 [TICKETS #4001].",
        "As a workaround, raise the file limit to 65536 and restart the export workers every 6 hours [TICKETS #4003].",
        "The storage client opens a new connection pool for every exported file [TICKETS #4003].",
        "Start with [TICKETS #4003].",  # names a record, claims nothing about it
    ],
)
def test_a_sentence_supported_by_its_record_is_kept(sentence):
    from oracle_rag.answering.chat.checking import check_sentence

    assert check_sentence(sentence, _claims()).ok


@pytest.mark.parametrize(
    ("sentence", "what"),
    [
        (
            "The export workers crash because ADFS signs assertions with SHA-1 [TICKETS #4003].",
            "another record's claim",
        ),
        ("[TICKETS #4003] is the one blocking the SSO upgrade.", "a topic the record does not mention"),
        (
            "Raise the file limit to 14 and restart the export workers [TICKETS #4003].",
            "a number of another record",
        ),
        ("The SSO change waits for the maintenance window on March 40 [TICKETS #4001].", "a swapped number"),
        (
            "Jonas Berg found that the storage client opens a new connection pool for every file [TICKETS #4003].",
            "a swapped person",
        ),
        (
            "The storage client closes its connection pool after every exported file [TICKETS #4003].",
            "a denial",
        ),
        ("The fix in 2.14.2 had user impact [TICKETS #4003].", "a denial"),
        ("The upgrade is not blocked by the ADFS signatures [TICKETS #4001].", "a negation"),
        (
            "The upgrade is blocked by SHA-1 signatures [TICKETS #4001] and the file limit [TICKETS #4003].",
            "one of two records",
        ),
    ],
)
def test_a_sentence_its_record_does_not_support_is_removed(sentence, what):
    from oracle_rag.answering.chat.checking import check_sentence

    verdict = check_sentence(sentence, _claims())
    assert not verdict.ok and verdict.reason == "claim", what


@pytest.mark.parametrize("sentence", ["8", "8.", "16 hours.", "[TICKETS #4001].", "- 3", "Yes."])
def test_a_lone_number_or_fragment_is_never_shown(sentence, evidence):
    from oracle_rag.answering.chat.checking import check_sentence

    assert check_sentence(sentence, _claims()).reason == "fragment"
    assert check_sentence(sentence, evidence).reason in ("fragment", "number", "anchor")
    assert check_text(sentence, evidence)[0] == ""


def test_the_meaning_is_compared_with_the_deployments_model(demo_rag):
    """Words alone would keep a sentence whose words are in a passage that says something else."""
    from oracle_rag.answering.chat.checking import check_sentence
    from oracle_rag.answering.chat.support import MIN_SIMILARITY

    evidence = _claims(demo_rag.engine.embed_many)
    kept = "As a workaround, raise the file limit to 65536 and restart the export workers every 6 hours [TICKETS #4003]."
    assert check_sentence(kept, evidence).ok
    found = evidence.support.check(kept.replace("[TICKETS #4003]", ""), [("TICKETS", "4003")])
    assert found.ok and (found.similarity >= MIN_SIMILARITY or found.coverage >= 0.9)


def test_a_model_naming_a_given_record_with_a_false_claim_falls_back_to_the_extractive_answer(demo_rag):
    """The issue's case: a valid anchor on a claim its record does not make is removed; with nothing
    left, the answer is the extractive one and says why."""
    dev = _who(demo_rag, DEV_A)
    with ScriptedLLM() as llm:
        chat = _chat(demo_rag, llm)
        llm.push("Nothing.")
        chat.answer("invoice PDF generation", dev, store=False)
        given = re.findall(r'<chunk id="TASK #(\d+)">', llm.requests[0].last_user)
        assert given
        llm.push(f"[TASK #{given[0]}] is the one blocking the SSO upgrade. 8")
        answer = chat.answer("invoice PDF generation", dev, store=False)
    assert answer.checked == {"sentences": 2, "removed": 2} and answer.answerer == "extractive"
    assert answer.answer.startswith("The language model's answer could not be checked")
    assert "SSO upgrade" not in answer.answer


# -- uncited claims and the question's topic ------------------------------------------------------
def _given(topic: str = ""):
    from oracle_rag.answering.chat.evidence import topic_evidence
    from oracle_rag.search.retriever import RetrievedChunk

    chunks = [
        RetrievedChunk("tickets", f"tickets#{i}", text, 1.0 / n, n, ("keyword",), n)
        for n, ((_, i), text) in enumerate(TICKETS.items(), 1)
    ]
    return topic_evidence(chunks, None, topic=topic)


def test_an_uncited_claim_is_shown_with_the_anchor_of_the_record_that_supports_it():
    """A small model writes the right sentence and no anchor: it is kept, attributed to the given record
    whose text supports it; an uncited sentence no given record supports is still removed."""
    text = (
        "The storage client opens a new connection pool for every exported file. "
        "The export workers crash because the disk of the server is full."
    )
    kept, tally = check_text(text, _given())
    assert kept == "The storage client opens a new connection pool for every exported file [TICKETS #4003]."
    assert (tally.sentences, tally.removed, tally.cited) == (2, 1, 1)
    checker = SentenceChecker(_given())
    assert "".join(checker.feed([text[i : i + 5] for i in range(0, len(text), 5)])).strip() == kept
    # a sentence claiming too little to be checked against a record is not attributed to one
    assert check_text("It is described in the records of the team.", _given())[0] == ""


def test_a_sentence_names_only_the_given_records_about_the_topic():
    """A sentence "the recurring job ran twice [#4063]" is true of #4063 and no answer to why webhooks arrive twice:
    when some given records are about the question's topic, a sentence names or is attributed to them only."""
    from oracle_rag.answering.chat.checking import check_sentence

    about_sso = _given("why is the SSO upgrade blocked")
    assert about_sso.about == frozenset({("TICKETS", "4001")})
    other = "As a workaround, raise the file limit to 65536 and restart the export workers every 6 hours"
    assert check_sentence(f"{other} [TICKETS #4003].", about_sso).reason == "topic"
    assert check_sentence(f"{other}.", about_sso).reason == "citation"  # not attributed to #4003 either
    assert check_sentence(
        "The upgrade is blocked because ADFS signs assertions with SHA-1 [TICKETS #4001].", about_sso
    ).ok
    # a topic no given record holds (a question in one language, records in another) restricts nothing
    elsewhere = _given("¿por qué fallan las exportaciones nocturnas?")
    assert elsewhere.about == frozenset() and check_sentence(f"{other} [TICKETS #4003].", elsewhere).ok


def test_a_spanish_claim_with_no_se_is_not_taken_for_i_do_not_know():
    """A sentence "no se timbran las facturas" states something ("no sé" says the model does not know): without a
    citation or a record supporting it, it is removed."""
    from oracle_rag.answering.chat.checking import check_sentence

    assert (
        check_sentence("No se decidió nada sobre la migración del conector.", _given()).reason == "citation"
    )
    assert check_sentence("No lo sé con los registros que tengo.", _given()).ok
