"""What the model is given, as data, and the :class:`Evidence` its prose is checked against.

The model no longer receives a structured answer's text to paraphrase: it
receives the computed facts as data (the understood question, the total and
the counts, and the records with their facet values and matching passage),
with the instruction not to restate counts, because the user already sees
them verbatim above the model's prose. The same data is what its sentences
are checked against (:mod:`oracle_rag.answering.chat.checking`).

Small models do worse with many passages (they copy from the wrong one), so
at most ``llm_passages`` records or chunks are given (default 4).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from oracle_rag.answering.chat.checking import Evidence, evidence_from
from oracle_rag.answering.chat.support import Embedder
from oracle_rag.answering.structured import relevance
from oracle_rag.answering.structured import render as structured_render
from oracle_rag.answering.structured.service import Record, StructuredResult
from oracle_rag.answering.structured.vocabulary import Vocabulary
from oracle_rag.sources.meanings import anchor_of


def anchor_key(anchor: str) -> tuple[str, str]:
    """``[TICKETS #1042]`` -> ("TICKETS", "1042"): how the checker keys a record the model may name."""
    shown_type, _, shown_id = anchor.strip("[]").partition("#")
    return shown_type.strip().upper(), shown_id.strip()


def given_records(result: StructuredResult, passages: int) -> list[Record]:
    """The records a structured answer hands to the model: the first ``passages``."""
    return result.records[: max(1, passages)]


def structured_data(result: StructuredResult, caller_id: int | None, summary: str, passages: int) -> str:
    """The computed facts as JSON: summary line, total, counts per group, the given records."""
    u = result.understanding
    data: dict[str, Any] = {"summary": summary, "kind": u.kind, "total": result.total}
    if u.group_by:
        data["counts"] = {
            structured_render.value_text(result.vocab, u.group_by, v, None, u.language): n
            for v, n in result.groups
        }
    records = []
    for r in given_records(result, passages):
        item: dict[str, Any] = {"id": r.anchor[1:-1], "title": r.title}
        item.update(structured_render.record_values(r, result, caller_id))
        text = r.passage or "\n".join(r.content.strip().split("\n")[1:])
        item["text"] = " ".join(text.split())[:600]
        records.append(item)
    data["records"] = records
    if len(result.records) > len(records):
        data["more_records_not_given"] = len(result.records) - len(records)
    return json.dumps(data, ensure_ascii=False, indent=1, default=str)


def structured_evidence(
    result: StructuredResult, shown: str, passages: int, embed: Embedder | None = None
) -> Evidence:
    """Numbers of the computed answer (as shown) and of the given records; the records, their facets
    and texts (what the model read of them: the passage given, else the record's text)."""
    given = given_records(result, passages)
    counts = [
        c for c in (result.total, len(result.records) or None) if c is not None
    ]  # total; "the first 20"
    counts += [n for _, n in result.groups]
    records = {anchor_key(r.anchor): (dict(r.facets), r.title) for r in given}
    texts = {anchor_key(r.anchor): (r.title + "\n" + r.passage if r.passage else r.content) for r in given}
    return evidence_from(
        [shown, *(r.content for r in given), *(r.passage for r in given)],
        counts=counts,
        records=records,
        vocab=result.vocab,
        shown=shown,
        record_texts=texts,
        embed=embed,
    )


def topic_evidence(
    chunks: Sequence[Any],
    vocab: Vocabulary | None,
    query_result: Any = None,
    embed: Embedder | None = None,
    topic: str = "",
) -> Evidence:
    """A topic answer: the given chunks (each sentence with a claim cites one and is supported by it)
    and a query result's values. ``topic``: what the question is about; when some given chunks are
    about it, a sentence may name only those (none is: a question in one language about records in
    another shares no words with them, and its records are not restricted)."""
    texts = [c.content for c in chunks]
    records = {}
    shown: dict[tuple[str, str], str] = {}
    stems = relevance.topic_stems(topic)
    about: set[tuple[str, str]] = set()
    by_record: dict[tuple[str, str], list[str]] = {}
    for c in chunks:
        first = c.content.strip().split("\n", 1)[0]
        anchor = anchor_of(c.source_type, str(c.source_id))
        key = anchor_key(anchor)
        records[key] = (dict(getattr(c, "facets", {}) or {}), first)
        shown[key] = anchor
        if stems and relevance.holds(stems, c.content):
            about.add(key)
        by_record.setdefault(key, []).append(c.content)
    counts: list[float] = []
    if query_result is not None:
        for row in query_result.rows:
            for v in row:
                if isinstance(v, int | float) and not isinstance(v, bool):
                    counts.append(float(v))
                elif v is not None:
                    texts.append(str(v))
        counts.append(float(len(query_result.rows)))
    evidence = evidence_from(
        texts,
        counts=(),
        records=records,
        vocab=vocab,
        cite=bool(chunks),
        record_texts={k: "\n".join(v) for k, v in by_record.items()},
        embed=embed,
    )
    evidence = replace(evidence, shown_anchors=shown, about=frozenset(about))
    if counts:
        evidence = replace(
            evidence,
            numbers=evidence.numbers | frozenset(counts),
            cite=evidence.cite and query_result is None,
        )
    return evidence
