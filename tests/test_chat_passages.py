"""The answer without a model quotes the sentences that answer, from the body or any comment, authors kept.

Pure tests of the sentence selection (oracle_rag/answering/chat/passages.py) on records written here, and the
whole path on a real embedded database: a help-desk table declared as a SQL source (no reference
tables), real ONNX embeddings of the sentences, ``Chat.answer`` without a model.
"""

from __future__ import annotations

import numpy as np
import pytest
import sqlalchemy as sa

from oracle_rag.answering.chat import Chat
from oracle_rag.answering.chat.answer import EXTRACTIVE_HEADER, extractive_answer
from oracle_rag.answering.chat.passages import best_passages, cues, split_record

HEAP = """Search nodes pause for 20 seconds during garbage collection
Customers report that search hangs for 20 seconds every few minutes because of garbage collection pauses.
Comments:
- Kwame Mensah (2026-01-27): The GC logs show full collections of 18 to 22 seconds.
- Jonas Berg (2026-01-28): The heap is set to 48 GB on machines with 64 GB of RAM. That is too high: above 32 GB the JVM turns off compressed pointers.
- Ana Pérez (2026-01-28): Decision: heap of 30 GB on every search node, rolling restart tonight."""

FILES = """Export workers crash with too many open files
Since release 2.14 the export workers crash after 40 minutes with too many open files.
Comments:
- Priya Natarajan (2026-02-10): Root cause: the storage client opens a new connection pool for every exported file and never closes it.
- Jonas Berg (2026-02-10): Workaround until the fix ships: raise the file limit to 65536 and restart the workers every 6 hours."""

ARTICLE = """Importing contacts from CSV
The importer accepts UTF-8 CSV files up to 50 MB. The first row must hold the column names. It detects commas and tabs as separators; for files that use semicolons, choose the delimiter under Advanced. A customer is matched to an existing one by its customer number, else by e-mail. Every import can be undone for 7 days under Import > History."""

TASK = """[TASK #7] Fix the invoice renderer
Status: IN_PROGRESS | Priority: HIGH | Sprint: S1
Project: Atlas Billing
Assignee: Ana Pérez
Description: The renderer times out on invoices with more than 500 lines.
Comments:
- Ana Pérez: I think the timeout comes from the font cache being rebuilt for every page."""


def quoted(question: str, records: list[str]) -> tuple[int, str]:
    """The record the best passage is in and its text, without a model's embeddings."""
    best = best_passages(question, records)[0]
    return best.record, " ".join(s.text for s in best.sentences)


def test_records_split_into_sentences_with_their_authors() -> None:
    title, sentences = split_record(HEAP)
    assert title.startswith("Search nodes pause")
    assert sentences[0].author is None and sentences[0].text.startswith("Customers report")
    by = {s.text: s.author for s in sentences}
    assert by["That is too high: above 32 GB the JVM turns off compressed pointers."] == "Jonas Berg"
    assert all(s.when == "2026-01-28" for s in sentences if s.author == "Ana Pérez")
    # the reference tasks' form: header lines are not prose, a labelled description is
    title, sentences = split_record(TASK)
    assert title == "[TASK #7] Fix the invoice renderer"
    assert [s.text for s in sentences][0] == "The renderer times out on invoices with more than 500 lines."
    assert not any("Priority" in s.text or "Atlas Billing" in s.text for s in sentences)
    assert sentences[-1].author == "Ana Pérez" and sentences[-1].when is None


def test_the_question_word_says_what_answers_in_both_languages() -> None:
    catalog = cues()
    assert "why" in catalog.of("¿Por qué no se timbran las facturas?") and "why" in catalog.of(
        "Why is it slow?"
    )
    assert "who" in catalog.of("¿Quién dijo que el heap era alto?")
    assert "workaround" in catalog.of("¿Hay una solución temporal?") and "workaround" in catalog.of(
        "Is there a workaround for this?"
    )
    assert "decision" in catalog.of("¿Qué se decidió sobre Adyen?") and "decision" in catalog.of(
        "What did we decide about Adyen?"
    )
    assert catalog.of("Tell me about the heap") == []


def test_a_comment_answers_rather_than_the_text_that_states_the_problem() -> None:
    # the opening restates the question word for word; the root cause is a comment further down
    record, text = quoted("Why do the export workers crash with too many open files?", [FILES])
    assert text.startswith("Root cause")
    record, text = quoted("Is there a workaround for too many open files?", [FILES])
    assert "65536" in text
    record, text = quoted("What was decided about the heap of the search nodes?", [HEAP])
    assert "30 GB" in text


def test_who_said_is_answered_by_the_author_and_the_answering_record_comes_first() -> None:
    text, citations = extractive_answer(
        [
            FakeChunk("kb", "kb#1", ARTICLE),
            FakeChunk("tickets", "tickets#9", FILES),
            FakeChunk("tickets", "tickets#4", HEAP),
        ],  # type: ignore[list-item]
        "Who said the heap was set too high?",
    )
    assert text.startswith(EXTRACTIVE_HEADER)
    assert citations[0].anchor == "[TICKETS #4]"
    first = text.split("\n")[2:4]
    assert first[0] == "1. [TICKETS #4] Search nodes pause for 20 seconds during garbage collection"
    assert first[1].strip().startswith("Jonas Berg (2026-01-28): The heap is set to 48 GB")
    assert "Jonas Berg" in citations[0].snippet or "heap is set" in citations[0].snippet


def test_a_long_paragraph_is_quoted_by_its_sentence() -> None:
    record, text = quoted("How do I import a CSV file that uses semicolons?", [ARTICLE])
    assert "choose the delimiter under Advanced" in text and "50 MB" not in text


class FakeChunk:
    def __init__(self, source_type: str, source_id: str, content: str) -> None:
        self.source_type, self.source_id, self.content = source_type, source_id, content

    @property
    def anchor(self) -> str:
        return f"[{self.source_type.upper()} #{self.source_id.split('#')[-1]}]"


# --- the whole path on a real database -----------------------------------------------------------

SOURCE = {
    "query": "SELECT t.id, t.subject AS title, t.body || COALESCE(char(10) || 'Comments:' || char(10) || ("
    "SELECT group_concat(line, char(10)) FROM (SELECT '- ' || c.author || ' (' || c.day || '): ' || "
    "c.body AS line FROM note c WHERE c.ticket_id = t.id ORDER BY c.day, c.id)), '') AS content, "
    "t.status FROM ticket t",
    "facet_columns": {"status": "enum"},
    "lifecycle": "status",
    "done_values": ["SOLVED"],
}


@pytest.fixture
def helpdesk(make_settings):
    from oracle_rag.system import RagSystem

    system = RagSystem(make_settings(sources={"tickets": SOURCE}))
    system.migrate()  # the product's tables only: no reference application
    records = {
        1: (HEAP, "SOLVED"),
        2: (FILES, "SOLVED"),
        3: (
            "Invoice PDFs show the old address\nWe moved offices and the invoice PDFs still show the old "
            "address.\nComments:\n- Marco Rossi (2026-02-11): Invoice PDFs use the billing profile's "
            "address, not the company address.",
            "OPEN",
        ),
        4: (
            "Las facturas CFDI no se timbran desde el lunes\nNinguna factura se timbra y hay 140 en cola."
            "\nComments:\n- Tomás Herrera (2026-02-09): La causa es que el certificado de sello digital "
            "(CSD) venció el 8 de febrero; el PAC rechaza todo lo firmado con un certificado vencido.",
            "SOLVED",
        ),
    }
    with system.engine.begin() as conn:
        conn.execute(
            sa.text("CREATE TABLE ticket (id INTEGER PRIMARY KEY, subject TEXT, body TEXT, status TEXT)")
        )
        conn.execute(
            sa.text(
                "CREATE TABLE note (id INTEGER PRIMARY KEY, ticket_id INTEGER, author TEXT, day TEXT, "
                "body TEXT)"
            )
        )
        note = 0
        for number, (text, status) in records.items():
            title, _, rest = text.partition("\n")
            body, _, thread = rest.partition("\nComments:\n")
            conn.execute(
                sa.text("INSERT INTO ticket VALUES (:id, :subject, :body, :status)"),
                {"id": number, "subject": title, "body": body, "status": status},
            )
            for line in thread.split("\n") if thread else []:
                author, _, said = line[2:].partition(" (")
                day, _, said = said.partition("): ")
                note += 1
                conn.execute(
                    sa.text("INSERT INTO note VALUES (:id, :ticket, :author, :day, :body)"),
                    {"id": note, "ticket": number, "author": author, "day": day, "body": said},
                )
    system.sql_sources().sync()
    yield system
    system.close()


def test_chat_without_a_model_quotes_the_comment_that_answers(helpdesk) -> None:
    from oracle_rag.callers.access import directory_for

    with helpdesk.engine.connect() as conn:
        caller = directory_for(helpdesk.engine).load(conn, 5)
    answer = Chat(helpdesk, None).answer(
        "Who said the JVM turns off compressed pointers?", caller, store=False
    )
    assert answer.answerer == "extractive" and answer.citations[0].anchor == "[TICKETS #1]"
    assert "Jonas Berg (2026-01-28): The heap is set to 48 GB" in answer.answer
    answer = Chat(helpdesk, None).answer("Why do the invoice PDFs show the old address?", caller, store=False)
    assert answer.citations[0].anchor == "[TICKETS #3]"
    assert "Marco Rossi (2026-02-11): Invoice PDFs use the billing profile's address" in answer.answer
    # a Spanish question: the answer's own words in Spanish, the record's quoted as written
    answer = Chat(helpdesk, None).answer("¿Por qué no se timbran las facturas CFDI?", caller, store=False)
    assert answer.answer.startswith("No hay un modelo de lenguaje configurado")
    assert answer.citations[0].anchor == "[TICKETS #4]"
    assert "Tomás Herrera (2026-02-09): La causa es que el certificado de sello digital" in answer.answer


def test_the_embedded_engine_embeds_sentences_as_its_sql_function_does(helpdesk) -> None:
    texts = [
        "The heap is set to 48 GB.",
        "Root cause: a leaked connection pool.",
        "The heap is set to 48 GB.",
    ]
    batch = helpdesk.engine.embed_many(texts, "query")
    with helpdesk.engine.connect() as conn:
        one_by_one = np.asarray([helpdesk.engine.embed(conn, t) for t in texts], dtype=np.float32)
    assert batch.shape == (3, 384)
    assert np.allclose(batch, one_by_one, atol=1e-5)


def test_a_prefixed_model_compares_a_query_with_passages(helpdesk) -> None:
    """The sentences are chosen with the active generation's model as it expects: e5's "query: " on the
    question, "passage: " on each sentence. The model is MiniLM with its outputs permuted and declared
    with those prefixes, so each vector can be checked against MiniLM's of the prefixed text."""
    from generation_helpers import PREFIXED_NAME, register_prefixed, rotate
    from writepath_helpers import CountingRuntime

    from oracle_rag.callers.access import directory_for
    from oracle_rag.indexing import model_switch

    register_prefixed()
    engine = helpdesk.engine
    model_switch.switch(engine, helpdesk.settings, PREFIXED_NAME)
    worker = helpdesk.worker()
    while not worker.run_once().idle:
        pass
    model_switch.activate(engine)

    question, sentence = "Who said the JVM turns off compressed pointers?", "The heap is set to 48 GB."
    minilm = engine.runtime()
    as_query, as_passage = (
        engine.embed_many([question], "query")[0],
        engine.embed_many([sentence], "passage")[0],
    )
    assert np.allclose(as_query, rotate(minilm.embed("query: " + question)), atol=1e-5)
    assert np.allclose(as_passage, rotate(minilm.embed("passage: " + sentence)), atol=1e-5)
    assert not np.allclose(as_query, rotate(minilm.embed(question)), atol=1e-3)
    with pytest.raises(ValueError, match="query' or 'passage"):
        engine.embed_many([question], "document")

    seen = CountingRuntime(engine.runtime_for(PREFIXED_NAME))
    engine.set_runtime_for(PREFIXED_NAME, seen)
    with engine.connect() as conn:
        caller = directory_for(engine).load(conn, 5)
    answer = Chat(helpdesk, None).answer(question, caller, store=False)
    assert answer.answerer == "extractive" and answer.citations[0].anchor == "[TICKETS #1]"
    # the search embeds its queries ("query: "), the sentence choice the question and each sentence
    queries = [t for t in seen.texts if t.startswith("query: ")]
    assert "query: " + question in queries and len(seen.texts) > len(queries), seen.texts
    assert all(t.startswith("passage: ") for t in seen.texts if t not in queries), seen.texts


def test_a_sentence_labelled_with_the_kind_wins_over_one_that_only_mentions_a_cue() -> None:
    record = """Dashboard takes over a minute to load
The operations dashboard takes 70 to 90 seconds to load for our account.
Comments:
- Priya Natarajan (2026-02-19): Workaround: set the dashboard's date range to the last 30 days; it loads in 4 seconds.
- Ana Pérez (2026-02-24): The index fix cannot go out until the partition migration is done."""
    assert cues().answers("workaround", "workaround: set the date range") == 2.0
    assert cues().answers("workaround", "it cannot go out until friday") == 1.0
    record_no, text = quoted(
        "Is there a workaround for the slow dashboard until the index is fixed?", [record]
    )
    assert text.startswith("Workaround: set the dashboard's date range")


SYNC = """Offline edits overwrite office edits
Work orders that technicians of Lakeside Dental edit offline overwrite 8 office edits a day.
Comments:
- Grace Walker (2026-02-02): Found it: conflicts are settled by last write wins on the device clock.
- Elena González (2026-02-03): Workaround until the fix ships: sync before going into the field.
- Noah Reyes (2026-02-04): Decided with Mia Reyes: tell Lakeside Dental about the workaround and close the ticket once 4.2 ships."""

SSO = """Sign-in fails with AADSTS50011
Users from Ironbridge Rail get error AADSTS50011 when they sign in (45 tickets so far). Decision: roll the identity service back to the previous version until the fix is verified.
Comments:
- Ava Ramírez (2026-02-05): Found it: the reply URL registered in Azure still points to the old domain."""

RESET = """Password reset links expire
Users at Nakatomi Trading get reset links that have expired 2 minutes before they arrive, every morning since the release of last week, and the support team has been resending them by hand all along. Root cause: the mail queue shares one worker with the weekly newsletter. Blocked: the database migration of release 4.6 has to land first."""


def test_who_is_answered_by_the_comment_that_did_what_the_question_asks() -> None:
    # "who found": the comment that found it, not the one that names the customer and decided something
    record, text = quoted(
        "Who found the root cause of the offline sync conflicts at Lakeside Dental?", [SYNC]
    )
    assert text.startswith("Found it: conflicts are settled")
    record, text = quoted("Who decided what to tell Lakeside Dental?", [SYNC])
    assert text.startswith("Decided with Mia Reyes")
    assert cues().phrases("who", "who found the cause") == ("found",)
    assert "said" in cues().phrases("who", "who is responsible")  # no verb of its own: every answer cue


def test_the_opening_answers_when_it_carries_the_answer_under_its_label() -> None:
    # the decision is in the record's own text, labelled; the comment found a cause and decides nothing
    record, text = quoted("What did we decide about the SSO problem of Ironbridge Rail?", [SSO])
    assert "Decision: roll the identity service back" in text


def test_the_sentence_of_the_questions_kind_is_quoted_with_the_records_best_match() -> None:
    # the words of the question are in the problem statement; what blocks it is a labelled sentence
    best = best_passages(
        "What is blocking the fix of the expired reset links Nakatomi Trading support resends by hand?",
        [RESET],
    )[0]
    texts = [s.text for s in best.sentences]
    assert any(t.startswith("Users at Nakatomi Trading") for t in texts)
    assert texts[-1] == "Blocked: the database migration of release 4.6 has to land first."
    # a passage that answers already is quoted alone
    best = best_passages("What is the root cause of the expired reset links?", [RESET])[0]
    assert not any(s.text.startswith("Blocked") for s in best.sentences)


def test_the_model_vouches_for_a_record_in_the_other_language_its_words_cannot_hold(helpdesk) -> None:
    """A Spanish question whose answer is an English ticket: the ticket holds under half of the topic's
    words (the Spanish ones are not in it), but the model finds it close to the question, over its
    ``about_similarity``: the answer quotes the workaround instead of saying nothing is about the
    question. A question nothing answers still says so: no record of the other language is that close."""
    from oracle_rag.answering.structured import relevance
    from oracle_rag.callers.access import directory_for
    from oracle_rag.embedding.catalog import MINILM
    from oracle_rag.search.retriever import Retriever

    with helpdesk.engine.connect() as conn:
        caller = directory_for(helpdesk.engine).load(conn, 5)
    chat = Chat(helpdesk, None)
    assert chat.about_similarity() == MINILM.about_similarity
    question = "¿Hay alguna solución para el error too many open files?"
    topic = "alguna solución error too files"
    chunks = Retriever(helpdesk.engine, helpdesk.settings).search(topic, None, caller, "hybrid")
    assert relevance.weak_evidence(topic, [c.content for c in chunks])  # by the words alone
    similar = chat.other_language_similarity(question, chunks, "es", caller)
    assert similar is not None and similar >= MINILM.about_similarity
    answer = chat.answer(question, caller, store=False)
    assert answer.answer.startswith("No hay un modelo de lenguaje configurado")
    assert answer.citations[0].anchor == "[TICKETS #2]" and "65536" in answer.answer
    nothing = chat.answer("¿Por qué se cae la VPN de la oficina cada tarde?", caller, store=False)
    assert nothing.answer.startswith("Nada de lo que puedo ver lo dice")


def test_an_open_question_finds_the_record_in_the_other_language_through_the_word_map(helpdesk) -> None:
    """An English question about a Spanish ticket the model does not find close (MiniLM is English): its
    words in Spanish ("invoices" is "facturas") find the ticket, which holds the topic through the map and
    the name the question gives it (CFDI): it is the answer, not "nothing I can see says"."""
    from oracle_rag.callers.access import directory_for

    with helpdesk.engine.connect() as conn:
        caller = directory_for(helpdesk.engine).load(conn, 5)
    chat = Chat(helpdesk, None)
    assert chat.crossed("CFDI invoices stamped", "Why are the CFDI invoices not stamped?", "en", caller)
    answer = chat.answer("Why are the CFDI invoices not stamped?", caller, store=False)
    assert answer.answer.startswith("No language model is configured")
    assert answer.citations[0].anchor == "[TICKETS #4]" and "(CSD)" in answer.answer
    # a name no record of the other language holds: nothing crosses
    assert not chat.crossed("SAT invoices stamped", "Why are the SAT invoices not stamped?", "en", caller)
