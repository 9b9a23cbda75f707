"""The relevance floor: the share of a topic's words a record holds (answering/structured/relevance.py)."""

from __future__ import annotations

from oracle_rag.answering.structured.catalog import TEXT, say
from oracle_rag.answering.structured.lexicon import fold, fold_latin
from oracle_rag.answering.structured.relevance import (
    ABOUT,
    coverage,
    is_about,
    names,
    other_language,
    other_language_similarity,
    topic_stems,
    translated,
    weak_evidence,
)


def test_coverage_counts_the_topics_content_words_by_their_stem():
    stems = topic_stems("Why were the invoices duplicated on February 1?")
    assert stems == {"invoi", "dupli", "febru"}  # filler and short words are not the topic
    assert coverage(stems, "Recurring invoice run: two invoices duplicated for each subscription") == 2 / 3
    # another language: not seen, unless crossing: then only the words of the EN/ES map cross ("invoice" is "factura"; "February" is not there)
    assert coverage(stems, "Facturas repetidas en febrero") == 0.0
    assert coverage(stems, "Facturas repetidas en febrero", crossing=True) == 1 / 3
    assert coverage(frozenset(), "anything") == 1.0


def test_a_record_is_about_a_topic_when_it_holds_the_floor():
    assert is_about("SSO upgrade", "The SSO upgrade is blocked by SHA-1 signatures")
    assert not is_about("SSO upgrade blocked", "Dashboard export is slow")
    assert ABOUT == 0.5


def test_weak_evidence_looks_at_the_first_records_only():
    far = [
        "Kafka sizing",
        "Printer driver",
        "Redis cache eviction",
        "Azure tenant",
        "Slack bot",
        "Kafka cluster upgrade postponed until the vendor patch",
    ]
    assert weak_evidence("Kafka cluster upgrade postponed", far)  # the sixth holds it: too far down
    assert not weak_evidence("Kafka cluster upgrade postponed", far[-1:] + far[:-1])
    assert not weak_evidence("", far)  # no topic: nothing to be weak about


def test_a_record_in_the_other_language_holds_the_topic_through_the_word_map():
    assert is_about(
        "mobile app session timeout", "La aplicación móvil cierra la sesión: tiempo de espera", crossing=True
    )
    assert is_about(
        "reembolso rechazado del cliente", "The customer's refund was rejected by the bank", crossing=True
    )
    assert not is_about("mobile app session timeout", "La impresora fiscal no imprime", crossing=True)
    # a word the map does not hold does not cross: a two-word topic still needs both
    assert not is_about("Kafka upgrade", "Actualización de la base de datos", crossing=True)
    assert not is_about(
        "mobile app session timeout", "La aplicación móvil cierra la sesión: tiempo de espera"
    )
    assert is_about("Kafka upgrade", "Actualización del clúster de Kafka", crossing=True)


def test_a_record_about_the_topic_must_hold_the_names_the_question_gives_it():
    question = "What did we decide about the API rate limiting problem of Northwind?"
    topic = "decide API rate limiting problem Northwind"
    assert names(topic, question) == {"api", "north"}
    other_customer = ["API rate limiting: Initech's nightly sync hits the limit. Decision: raise it to 600."]
    assert not weak_evidence(topic, other_customer)  # the words alone: about it
    assert weak_evidence(topic, other_customer, named=names(topic, question))  # but not about Northwind
    northwind = "Northwind: API rate limiting problem, decided to wait."
    assert not weak_evidence(topic, [*other_customer, northwind], named=names(topic, question))
    # the question's first word, months and days, and a question typed in title case name nothing
    assert names("Kafka upgrade postponed", "Kafka upgrade postponed?") == frozenset()
    assert names("reset mails late Monday", "Why are reset mails late on Monday?") == frozenset()
    assert names("Reset Mails Late Monday", "Why Are Reset Mails Late On Monday?") == frozenset()


def test_only_a_record_in_the_other_language_can_be_vouched_for_by_the_model():
    assert other_language("Las facturas CFDI no se timbran desde el lunes y hay 140 en cola.", "en")
    assert not other_language("The invoices are not stamped since Monday.", "en")
    texts = [
        "The invoices are not stamped since Monday.",  # the question's language: its words judge it
        "Las facturas CFDI no se timbran desde el lunes y hay 140 en cola.",
        "El certificado de sello digital venció el 8 de febrero.",
        "La impresora fiscal no imprime los tickets de la caja.",
    ]
    assert other_language_similarity(texts, [0.9, 0.52, None, 0.31], "en") == 0.52
    assert other_language_similarity(texts[:1], [0.9], "en") is None  # none in the other language
    # only the first records are the evidence
    far = ["The invoices are not stamped."] * 5 + ["Las facturas no se timbran desde el lunes."]
    assert other_language_similarity(far, [0.1] * 5 + [0.9], "en") is None


def test_every_language_says_every_sentence():
    assert {k for k in TEXT["es"]} == {k for k in TEXT["en"]}
    assert say("fr", "weak", topic="x").startswith("Nothing I can see says")  # no French: English


def test_the_quick_fold_is_the_fold():
    """Every record a list matches is read with fold_latin: it must read as fold does, on every Latin
    letter with marks and on text in other scripts (which it hands to fold)."""
    for cp in range(0x20, 0x250):
        assert fold_latin(chr(cp)) == fold(chr(cp)), hex(cp)
    for text in ("Migración ÑANDÚ straße Œuvre", "Ελληνικά άλφα", "\ufb01ne", "x\u00b2", "İstanbul"):
        assert fold_latin(text) == fold(text), text


def test_a_topic_is_translated_by_the_word_map_only():
    assert set(translated("login timeout on the mobile app").split()) >= {
        "sesion",
        "espera",
        "movil",
        "aplicacion",
    }
    assert "invoice" in translated("facturas duplicadas").split()
    assert translated("Kafka heap") == ""  # nothing of the map: nothing to search in the other language
