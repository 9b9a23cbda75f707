"""Answer a question for a caller: retrieve in scope, ask the model, cite, remember.

``Chat.answer`` returns a :class:`ChatAnswer`; ``Chat.stream`` returns a
:class:`ChatStream` that yields the answer piece by piece and then a final
event carrying the whole :class:`ChatAnswer`. Both do the same work in the
same order:

1. the caller is required (no anonymous reads) and the question is cleaned
   and length-checked;
2. a conversation id, if given, must be the caller's (else NotFoundError);
3. the caller's top-k chunks are retrieved, the scope applied in SQL;
4. with a language model configured, the prompt is the system rules, the
   last turns within ``history_token_budget`` and the delimited chunks; the
   citations are the answer's anchors that name a retrieved chunk. Without
   one, an extractive answer lists the top records, clearly labelled. With
   no chunk visible, the answer says so without calling the model;
5. the question and answer are stored in the conversation (created on the
   first turn).

For streams, everything up to opening the model's response happens when
``stream()`` is called, so bad input, a foreign conversation or a refusing
endpoint raise there (and become an HTTP status) before any byte is sent.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from oracle_rag import tracing
from oracle_rag.answering.aggregate import AggregateResult, AggregateService
from oracle_rag.answering.aggregate.literals import masked_literals
from oracle_rag.answering.chat import chat_sql
from oracle_rag.answering.chat.checking import Checked, Evidence, SentenceChecker
from oracle_rag.answering.chat.chunks import chunk_detail
from oracle_rag.answering.chat.citations import Citation, citation_for, select_citations, snippet
from oracle_rag.answering.chat.conversations import ConversationStore, new_conversation_id
from oracle_rag.answering.chat.evidence import structured_data, structured_evidence, topic_evidence
from oracle_rag.answering.chat.llm import LLMClient
from oracle_rag.answering.chat.mentions import RecordWords, Visible, redact_stream
from oracle_rag.answering.chat.passages import Embedder, Sentence, best_passages
from oracle_rag.answering.chat.prompt import (
    Subject,
    Turn,
    build_messages,
    build_structured_messages,
    select_history,
)
from oracle_rag.answering.chat.router import (
    AGGREGATION_UNAVAILABLE,
    NO_GUARDED_VIEWS,
    Route,
    RouteName,
    fallback_route,
    looks_aggregate,
    measure_route,
    route,
)
from oracle_rag.answering.structured import relevance
from oracle_rag.answering.structured import render as structured_render
from oracle_rag.answering.structured.catalog import in_every_language, say
from oracle_rag.answering.structured.relevance import weak_evidence
from oracle_rag.answering.structured.service import AnswerService, StructuredResult
from oracle_rag.answering.structured.understood import AnswerKind, Understanding
from oracle_rag.callers.audit import audit_for
from oracle_rag.callers.caller import Caller, require_caller
from oracle_rag.config import Settings
from oracle_rag.embedding import catalog as embedding_catalog
from oracle_rag.engines import Filters
from oracle_rag.errors import EmbeddingError, InputError, LLMError, NotFoundError, RagError
from oracle_rag.search.results import RetrievedChunk
from oracle_rag.search.retriever import MODES, Retriever, clean_query
from oracle_rag.sources.meanings import Declaration
from oracle_rag.system import RagSystem

DEFAULT_MODE = "hybrid"
EXTRACTIVE_HEADER = say("en", "extractive")
EXTRACTIVE_HEADERS = in_every_language("extractive")  # the answer without a model begins with one of these
QUOTED_HEADERS = in_every_language("quoted")  # what precedes the cited records' own sentences
EXTRACTIVE_COUNT = 3
EXTRACTIVE_POOL = 5
NOTHING_FOUND = (
    "I could not find any records you are allowed to see that match the question, so I cannot answer it."
)
UNCHECKED = (
    "The language model's answer could not be checked against the records it was given, "
    "so here are the most relevant records instead:"
)
MODEL_FAILED = "({what}; the answer above is computed from the data.)"

Observer = Callable[[str, float, dict[str, str]], None]
_UNSET: Any = object()


@dataclass(frozen=True)
class RetrievalInfo:
    mode: str
    k: int
    latency_ms: float
    chunks: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "mode": self.mode,
            "k": self.k,
            "latency_ms": round(self.latency_ms, 2),
            "chunks": self.chunks,
        }


class Answerer(StrEnum):
    """What wrote an answer's text (``ChatAnswer.answerer``)."""

    LLM = "llm"
    STRUCTURED = "structured"  # computed from the declared facets (answers.render)
    EXTRACTIVE = "extractive"  # the records' own sentences
    AGGREGATE = "aggregate"  # guarded SQL's result or its failure
    NONE = "none"  # no visible chunk matched


@dataclass(frozen=True)
class ChatAnswer:
    answer: str
    citations: list[Citation]
    conversation_id: str | None
    retrieval: RetrievalInfo
    answerer: Answerer
    route: RouteName = RouteName.RETRIEVAL
    aggregate: AggregateResult | None = None
    structured: dict[str, Any] | None = None  # what was understood and computed (answers.render)
    checked: dict[str, Any] | None = None  # the model's sentences checked and removed (chat.checking)
    message_id: int | None = None  # the stored answer's id, what POST /api/feedback rates (None: not stored)

    @property
    def model_answered(self) -> bool:
        """The model was asked and answered (its sentences may still have been removed)."""
        return self.checked is not None and "model_error" not in self.checked

    def to_dict(self) -> dict[str, Any]:
        return {
            "answer": self.answer,
            "citations": [c.to_dict() for c in self.citations],
            "conversation_id": self.conversation_id,
            "retrieval": self.retrieval.to_dict(),
            "answerer": self.answerer,
            "route": self.route,
            "aggregate": aggregate_dict(self.aggregate),
            "structured": self.structured,
            "checked": self.checked,
            "message_id": self.message_id,
        }


def aggregate_dict(result: AggregateResult | None) -> dict[str, Any] | None:
    """What the API shows of an aggregate: the executed SQL, rows, cap and timeout flags."""
    if result is None:
        return None
    return {
        "sql": result.sql,
        **result.rows_dict(),
        "timed_out": result.timed_out,
        "error": result.error,
        "attempts": result.attempts,
    }


@dataclass(frozen=True)
class ChatEvent:
    """One stream event: ``token`` (text), then ``done`` (answer) or ``error`` (error)."""

    kind: str
    text: str = ""
    answer: ChatAnswer | None = None
    error: RagError | None = None


def extractive_answer(
    chunks: Sequence[RetrievedChunk],
    question: str = "",
    embed: Embedder | None = None,
    texts: Sequence[str] | None = None,
    header: str = EXTRACTIVE_HEADER,
) -> tuple[str, list[Citation]]:
    """The labelled no-model answer: the records whose sentences answer ``question`` best, each with
    its anchor, its first line and those sentences (a comment's author and date kept).

    The first ``EXTRACTIVE_POOL`` records compete (``texts``: their whole text when a chunk holds only
    part of it); they are ordered by their best sentence (:mod:`oracle_rag.answering.chat.passages`), so the
    record that answers comes first even when retrieval ranked it lower. Without a question, the
    top records with their first lines."""
    pool = list(chunks[:EXTRACTIVE_POOL])
    contents = list(texts) if texts is not None else [c.content for c in pool]
    passages = {p.record: p for p in best_passages(question, contents, embed)} if question.strip() else {}
    order = list(passages) + [i for i in range(len(pool)) if i not in passages]
    lines = [header, ""]
    citations = []
    for n, i in enumerate(order[:EXTRACTIVE_COUNT], 1):
        c = pool[i]
        first, _, rest = contents[i].strip().partition("\n")
        head = first if first.startswith(c.anchor) else f"{c.anchor} {first}"
        lines.append(f"{n}. {head}")
        passage = passages.get(i)
        if passage is not None:
            quoted = [quote(s) for s in passage.sentences]
            lines.extend(f"   {q}" for q in quoted)
            citations.append(
                Citation(c.source_type, c.source_id, snippet(" ".join(s.text for s in passage.sentences)))
            )
        else:
            if rest.strip():
                lines.append(f"   {snippet(rest, 200, query=question)}")
            citations.append(citation_for(c, question))
    return "\n".join(lines), citations


def quote(sentence: Sentence) -> str:
    """A sentence as the answer shows it: a comment's author (and date) first."""
    if sentence.author is None:
        return sentence.text
    when = f" ({sentence.when})" if sentence.when else ""
    return f"{sentence.author}{when}: {sentence.text}"


@dataclass
class _Prepared:
    caller: Caller
    question: str
    mode: str
    conversation_id: str | None
    new_conversation: bool
    store: bool
    chunks: list[RetrievedChunk]
    retrieval: RetrievalInfo
    history: list[Turn] = field(default_factory=list)
    route: Route | None = None
    aggregate: AggregateResult | None = None
    structured: StructuredResult | None = None
    topic: str = ""  # what the question is about (its words less the filler and what was understood)
    language: str = "en"
    weak: bool = False  # no retrieved record is about the topic: "nothing I can see says ..."
    preface: str = ""  # said before the answer: the filters dropped because no record they match is about it


class Chat:
    """The product's answer logic; the web API and the CLI only call it."""

    def __init__(
        self,
        rag: RagSystem,
        llm: LLMClient | None = _UNSET,
        *,
        observer: Observer | None = None,
        settings: Settings | None = None,
        structured: bool = True,
        today: Callable[[], dt.date] | None = None,
    ) -> None:
        """``llm`` defaults to the one configured in settings (None: extractive answers);
        ``settings`` defaults to the RagSystem's (chat knobs: top_k, history budget, limits).
        ``structured=False`` turns the structured answerer off (the retrieval-only baseline of
        bench/qa.py); ``today`` is the date "overdue" and "this week" are relative to (UTC)."""
        self.rag = rag
        self.settings = settings or rag.settings
        self.llm: LLMClient | None = LLMClient.from_settings(self.settings) if llm is _UNSET else llm
        self.store = ConversationStore(rag.engine)
        self.aggregates = AggregateService(rag.engine, self.settings)
        self.observer = observer
        self.today = today or (lambda: dt.datetime.now(dt.UTC).date())
        people = getattr(rag, "people", None)
        self.answers = (
            AnswerService(
                rag.engine,
                lambda: declared_facets(rag),
                list_limit=self.settings.list_limit,
                people=people.names if people is not None else None,
            )
            if structured
            else None
        )

    def _observe(self, what: str, seconds: float, **labels: str) -> None:
        if self.observer is not None:
            self.observer(what, seconds, labels)

    # -- the shared first half -------------------------------------------
    def _understand(
        self, text: str, who: Caller, mode: str, drop: Sequence[str]
    ) -> tuple[StructuredResult | None, str, Understanding | None]:
        """The structured answer when the question is a lookup, a filter list or a count, the
        question's topic (its words less the filler: what a topic question is searched with), and what
        was understood (None without the structured answerer)."""
        if self.answers is None:
            return None, text, None
        started = time.perf_counter()
        u, vocab = self.answers.understand(text, who, today=self.today(), drop=drop)
        if not u.structured:
            return None, u.topic or text, u
        with tracing.span(
            "structured sql",
            {
                "db.system.name": self.rag.engine.sql_dialect,
                "db.operation.name": "SELECT",
                "oracle_rag.structured.kind": u.kind,
            },
            kind="client",
        ) as sql_span:
            result = self.answers.run(u, vocab, who, mode=mode, settings=self.settings)
            sql_span.set_attribute("db.response.returned_rows", len(result.records))
            if result.total is not None:
                sql_span.set_attribute("oracle_rag.structured.total", result.total)
        self._observe("retrieval", time.perf_counter() - started, mode="structured")
        return result, u.topic or text, u

    def _prepare(
        self,
        question: Any,
        caller: Any,
        conversation_id: Any,
        mode: Any,
        store: bool,
        given_history: Sequence[Turn] = (),
        drop: Sequence[str] = (),
    ) -> _Prepared:
        who = require_caller(caller)
        text = clean_query(question, self.settings.max_question_chars)
        mode = DEFAULT_MODE if mode is None else mode
        if mode not in MODES:
            raise InputError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        history = select_history(list(given_history), self.settings.history_token_budget)
        new = conversation_id is None
        if not new:
            turns = self.store.recent_turns(conversation_id, who.employee_id)  # NotFoundError if not theirs
            history = select_history(turns, self.settings.history_token_budget)
        elif store:
            conversation_id = new_conversation_id()
        started = time.perf_counter()
        with tracing.span("query understanding") as understood:
            structured, topic, understood_as = self._understand(text, who, mode, check_drop(drop))
            preface = ""
            if structured is not None and nothing_about_topic(structured):
                # "what is blocked about the SSO upgrade?" where no blocked record is about it: said, and
                # the topic answered without the filters, naming them
                preface = dropped_filters(structured, who.employee_id)
                structured = None
            if structured is None:
                # With the structured answerer on, a question that does not look like an aggregate is a
                # topic question: asking a (slow, maybe weak) model to route it cost a model call and
                # sent "is there anything about the nightly backup?" to SQL. An aggregate of a measure
                # ("the largest estimate") is the words' to route, not the model's.
                by_words = measure_route(
                    understood_as.measure if understood_as else None, llm_available=self.llm is not None
                )
                chosen = by_words or (
                    route(text, self.llm)
                    if self.answers is None or looks_aggregate(text)
                    else fallback_route(text, llm_available=False)
                )
                if chosen.aggregation and not self.rag.sources.settle():
                    # no reference application, no views for guarded SQL: the records answer
                    chosen = Route(retrieval=True, aggregation=False, decided_by=chosen.decided_by)
                understood.set_attributes(
                    {
                        "oracle_rag.route": chosen.name,
                        "oracle_rag.route.retrieval": chosen.retrieval,
                        "oracle_rag.route.aggregation": chosen.aggregation,
                    }
                )
            else:
                understood.set_attributes(
                    {
                        "oracle_rag.route": "structured",
                        "oracle_rag.structured.kind": structured.understanding.kind,
                    }
                )
        if structured is not None:
            info = RetrievalInfo(
                mode,
                self.settings.list_limit,
                (time.perf_counter() - started) * 1000,
                len(structured.records),
            )
            return _Prepared(
                who,
                text,
                mode,
                conversation_id,
                new,
                store or not new,
                [],
                info,
                history,
                Route(False, False, "structured"),
                None,
                structured,
            )
        chunks: list[RetrievedChunk] = []
        info = RetrievalInfo(mode, 0, 0.0, 0)
        # "¿hay tareas sobre el checkout?": the records of the type the question asks for
        asked = tuple(understood_as.asked_types) if understood_as is not None else ()
        if chosen.retrieval:
            with tracing.span(
                "retrieval", {"oracle_rag.search.mode": mode, "enduser.id": str(who.employee_id)}
            ) as found:
                retriever = Retriever(self.rag.engine, self.settings)
                chunks = retriever.search(topic, None, who, mode, Filters(source_types=asked))
                found.set_attribute("oracle_rag.search.hits", len(chunks))
            stats = retriever.last_stats
            assert stats is not None  # set by every search
            info = RetrievalInfo(mode, stats.k, stats.latency_ms, len(chunks))
            self._observe("retrieval", stats.latency_ms / 1000, mode=mode)
        aggregate = None
        if chosen.aggregation and self.llm is not None:
            started = time.monotonic()
            with tracing.span("aggregate", {"enduser.id": str(who.employee_id)}) as counted:
                aggregate = self.aggregates.ask(text, who, self.llm.complete_query)
                counted.set_attributes(
                    {
                        "oracle_rag.sql.attempts": aggregate.attempts,
                        "oracle_rag.sql.outcome": "error" if aggregate.error else "ok",
                    }
                )
            self._observe(
                "aggregate", time.monotonic() - started, outcome="error" if aggregate.error else "ok"
            )
        # A follow-up ("and the third?") is about what the conversation is about: its own words cannot
        # tell that nothing is about it.
        # An aggregate question answered from records (no model to write its SQL) says so already.
        weak = (
            understood_as is not None
            and bool(chunks)
            and aggregate is None
            and not history
            and chosen.decided_by != "words"
            and not looks_aggregate(text)
            and weak_evidence(topic, (c.content for c in chunks), named=relevance.names(topic, text))
        )
        if weak and understood_as is not None and (floor := self.about_similarity()) is not None:
            # a record in the other language holds none of the topic's words: the model may vouch for it
            similar = self.other_language_similarity(text, chunks, understood_as.language, who, asked)
            weak = similar is None or similar < floor
        if weak and understood_as is not None:
            # the records in the other language, found by the topic's words in that language
            crossed = self.crossed(topic, text, understood_as.language, who, asked)
            if crossed:
                chunks, weak = crossed, False
        return _Prepared(
            who,
            text,
            mode,
            conversation_id,
            new,
            store or not new,
            chunks,
            info,
            history,
            chosen,
            aggregate,
            None,
            topic,
            understood_as.language if understood_as else "en",
            weak,
            preface,
        )

    def _finish(
        self,
        prep: _Prepared,
        text: str,
        citations: list[Citation],
        answerer: Answerer,
        checked: dict[str, Any] | None = None,
    ) -> ChatAnswer:
        guarded_sql = prep.aggregate.sql if prep.aggregate is not None else None
        details = (
            structured_render.structured_dict(prep.structured, prep.caller.employee_id)
            if prep.structured is not None
            else None
        )
        message_id = None
        if prep.store and prep.conversation_id is not None:
            understood = (
                {"kind": details["kind"], "filters": details["filters"], "language": details["language"]}
                if details
                else None
            )
            message_id = self.store.append_turn(
                prep.conversation_id,
                prep.caller.employee_id,
                prep.question,
                text,
                citations,
                new=prep.new_conversation,
                understood=understood,
                guarded_sql=guarded_sql,
            )
        self._observe("answer", 0.0, answerer=answerer)
        audit_for(self.rag.engine).record(
            prep.caller.employee_id,
            "answer",
            [(c.source_type, c.source_id) for c in citations],
            guarded_sql=guarded_sql,
            masked_sql=masked_literals(guarded_sql, self.rag.engine.sql_dialect),
            question=prep.question,
        )
        route_name = (
            RouteName.STRUCTURED
            if prep.structured is not None
            else prep.route.name
            if prep.route
            else RouteName.RETRIEVAL
        )
        return ChatAnswer(
            text,
            citations,
            prep.conversation_id if prep.store else None,
            prep.retrieval,
            answerer,
            route_name,
            prep.aggregate,
            details,
            checked,
            message_id,
        )

    def _answerer(self, prep: _Prepared) -> Answerer:
        if prep.structured is not None:
            # the model writes prose only where there are records or numbers to talk about
            worth = prep.structured.records or (
                prep.structured.total and prep.structured.understanding.kind == AnswerKind.COUNT
            )
            return Answerer.LLM if self.llm is not None and worth else Answerer.STRUCTURED
        agg = prep.aggregate
        if agg is not None and agg.error and not prep.chunks:
            return Answerer.AGGREGATE  # the query failed and there is nothing else: explain the failure
        if not prep.chunks and agg is None:
            return Answerer.NONE
        if prep.weak:
            return (
                Answerer.EXTRACTIVE
            )  # nothing is about the topic: no model is asked to make something of it
        return Answerer.LLM if self.llm is not None else Answerer.EXTRACTIVE

    def _direct_text(self, prep: _Prepared, answerer: Answerer) -> tuple[str, list[Citation]]:
        """The answer when no model call is needed (no records, extractive, failed aggregate)."""
        if answerer == Answerer.STRUCTURED:
            assert prep.structured is not None
            return (
                structured_render.render_text(prep.structured, prep.caller.employee_id),
                structured_citations(prep.structured),
            )
        if answerer == Answerer.NONE:
            return (f"{prep.preface}\n\n{NOTHING_FOUND}" if prep.preface else NOTHING_FOUND), []
        if answerer == Answerer.AGGREGATE:
            assert prep.aggregate is not None
            return prep.aggregate.answer, []
        if prep.weak:
            # nothing answers: the closest records in the order retrieval found them, their first lines
            text, citations = extractive_answer(prep.chunks, "")
            text = say(prep.language, "weak", topic=prep.topic) + "\n\n" + text.split("\n", 2)[2]
        else:
            text, citations = self._extractive(prep)
        if prep.preface:
            text = prep.preface + "\n\n" + text
        if looks_aggregate(prep.question) or (prep.route is not None and prep.route.decided_by == "words"):
            text = f"{AGGREGATION_UNAVAILABLE if self.rag.sources.settle() else NO_GUARDED_VIEWS}\n\n{text}"
        return text, citations

    def _extractive(
        self, prep: _Prepared, pool: Sequence[RetrievedChunk] | None = None, header: str = "extractive"
    ) -> tuple[str, list[Citation]]:
        """The extractive answer over the records' whole texts, sentences compared by the model too
        (``pool``: the records that compete, the first retrieved by default)."""
        pool = prep.chunks[:EXTRACTIVE_POOL] if pool is None else pool
        texts = []
        with self.rag.engine.connect() as conn:
            for c in pool:
                try:
                    texts.append(
                        chunk_detail(conn, self.rag.engine, prep.caller, c.source_type, c.source_id).content
                    )
                except NotFoundError:  # gone since it was retrieved: what was retrieved is what there is
                    texts.append(c.content)
        return extractive_answer(pool, prep.question, self._embed, texts, say(prep.language, header))

    def _quoted(self, prep: _Prepared, citations: Sequence[Citation]) -> tuple[str, list[Citation]]:
        """Under a model's checked answer, the sentences that answer the question in the records' own
        words, as the extractive answer quotes them: of the first retrieved records about the question's
        topic (all of the first when none is: a question in one language about records in another) and
        of the records the answer cites. A small model's prose is often right and short of what answers
        (the symptom for a "why", "ten seconds" for "10 seconds", one of two records that answer); the
        quoted sentences are what the reader can verify. Citations: the records the prose cites, as
        without the quotes, then the other quoted records."""

        def key(c: Any) -> tuple[str, str]:
            return c.source_type, str(c.source_id)

        cited = {key(c) for c in citations}
        first = prep.chunks[:EXTRACTIVE_POOL]
        about = [c for c in first if relevance.is_about(prep.topic, c.content)]
        pool = [c for c in first if c in about or key(c) in cited] if about else list(first)
        pool += [c for c in self._given(prep) if key(c) in cited and c not in pool]
        text, quoted = self._extractive(prep, pool, "quoted")
        return text, [*citations, *(c for c in quoted if key(c) not in cited)]

    def about_similarity(self) -> float | None:
        """The active model's ``about_similarity`` (None: it never vouches, or it is not one this process
        knows)."""
        with self.rag.engine.connect() as conn:
            name = self.rag.engine.active_generation(conn).model_name
        try:
            return embedding_catalog.get(name).about_similarity
        except EmbeddingError:  # a model registered in another process: nothing measured for it
            return None

    def other_language_similarity(
        self,
        question: str,
        chunks: Sequence[RetrievedChunk],
        language: str,
        who: Caller,
        asked: Sequence[str] = (),
    ) -> float | None:
        """How similar to ``question`` the closest of the first records written in the other language is
        (:func:`relevance.other_language_similarity`): one search of the question's own words by the
        semantic leg, only when the first records include such a record."""
        first = list(chunks[: relevance.EVIDENCE_DEPTH])
        if not any(relevance.other_language(c.content, language) for c in first):
            return None
        near = {
            (c.source_type, str(c.source_id)): 1.0 - c.distance
            for c in Retriever(self.rag.engine, self.settings).search(
                question, None, who, "semantic", Filters(source_types=tuple(asked))
            )
            if c.distance is not None
        }
        return relevance.other_language_similarity(
            [c.content for c in first], [near.get((c.source_type, str(c.source_id))) for c in first], language
        )

    def crossed(
        self, topic: str, question: str, language: str, who: Caller, asked: Sequence[str] = ()
    ) -> list[RetrievedChunk]:
        """The records written in the other language that hold ``topic`` through the lexicon's EN/ES
        word map (:func:`relevance.translated`, :func:`relevance.holds` with ``crossing``) and every name
        the question gives it, found by a keyword search of the topic in both languages; empty when
        none does. For an open question whose own words found nothing: the map never reaches a filter."""
        other = relevance.translated(topic)
        if not other:
            return []
        stems, named = relevance.topic_stems(topic), relevance.names(topic, question)
        hits = Retriever(self.rag.engine, self.settings).search(
            f"{topic} {other}", None, who, "keyword", Filters(source_types=tuple(asked))
        )
        return [
            c
            for c in hits[: relevance.EVIDENCE_DEPTH]
            if relevance.other_language(c.content, language)
            and relevance.holds(stems, c.content, crossing=True)
            and relevance.holds_names(named, c.content)
        ]

    def _embed(self, texts: Sequence[str], kind: str = "passage") -> Any:
        """The deployment's model over a few sentences (prefixed as ``kind``: "query" or "passage");
        none when it cannot run (words decide alone)."""
        try:
            return self.rag.engine.embed_many(texts, kind)
        except RagError:
            return None

    def visible_records(self, caller: Caller) -> Visible:
        """A scope check for the records an answer's text mentions, run in SQL (one statement per type)."""

        def check(keys: set[tuple[str, str]]) -> set[tuple[str, str]]:
            by_type: dict[str, list[str]] = {}
            for source_type, source_id in keys:
                by_type.setdefault(source_type, []).append(source_id)
            seen: set[tuple[str, str]] = set()
            with self.rag.engine.connect() as conn:
                for source_type, ids in sorted(by_type.items()):
                    rows = conn.execute(
                        self.rag.engine.statement(chat_sql.VISIBLE_RECORDS),
                        {"source_type": source_type, "ids": sorted(ids), **caller.scope().binds()},
                    )
                    seen |= {(source_type, str(r[0])) for r in rows}
            return seen

        return check

    def subject(self, caller: Caller) -> Subject:
        """The deployment's records as the prompt names them (the sources' declarations)."""
        if self.answers is None:
            return Subject.of([(t.lower(), t.upper()) for t in self.rag.sources.types()])
        meanings = self.answers.parser(caller.scope()).vocab.meanings
        return Subject.of(
            [(m.noun(2, "en") if m.nouns else t.lower(), m.anchor or t.upper()) for t, m in meanings.items()]
        )

    def record_words(self, caller: Caller) -> RecordWords:
        """The words that name records (the sources' declarations), for redacting mentions."""
        types = self.rag.sources.types()
        if self.answers is None:
            return RecordWords.of({}, types)
        vocab = self.answers.parser(caller.scope()).vocab
        prefixes = {t: m.id_prefix for t, m in vocab.meanings.items() if m.id_prefix}
        return RecordWords.of(vocab.type_words, [*types, *vocab.types], prefixes)

    def _given(self, prep: _Prepared) -> list[RetrievedChunk]:
        """The chunks a topic answer hands to the model: the first ``llm_passages``."""
        return prep.chunks[: self.settings.llm_passages]

    def _usable_aggregate(self, prep: _Prepared) -> AggregateResult | None:
        return prep.aggregate if prep.aggregate is not None and not prep.aggregate.error else None

    def _messages(self, prep: _Prepared) -> list[dict[str, str]]:
        if prep.structured is not None:
            shown = structured_render.render_text(prep.structured, prep.caller.employee_id)
            facts = structured_data(
                prep.structured, prep.caller.employee_id, shown.split("\n", 1)[0], self.settings.llm_passages
            )
            return build_structured_messages(prep.question, facts, prep.history, self.subject(prep.caller))
        return build_messages(
            prep.question,
            self._given(prep),
            prep.history,
            self._usable_aggregate(prep),
            subject=self.subject(prep.caller),
            query_chars=self.settings.aggregate_prompt_chars,
        )

    def _evidence(self, prep: _Prepared) -> Evidence:
        """What the model's sentences are checked against (:mod:`oracle_rag.answering.chat.evidence`)."""
        if prep.structured is not None:
            shown = structured_render.render_text(prep.structured, prep.caller.employee_id)
            return structured_evidence(prep.structured, shown, self.settings.llm_passages, self._embed)
        vocab = self.answers.parser(prep.caller.scope()).vocab if self.answers is not None else None
        return topic_evidence(self._given(prep), vocab, self._usable_aggregate(prep), self._embed, prep.topic)

    def _head(self, prep: _Prepared) -> str:
        """The computed part shown before the model's prose, verbatim: a structured answer, or what
        the guarded query returned ("" for a topic answer)."""
        if prep.structured is not None:
            return structured_render.render_text(prep.structured, prep.caller.employee_id)
        usable = self._usable_aggregate(prep)
        return usable.answer if usable is not None and not prep.chunks else ""

    def _compose(self, prep: _Prepared, open_model: Callable[[], Iterator[str]], run: _Run) -> Iterator[str]:
        """The answer's pieces: the computed head at once, then the model's checked sentences.

        ``open_model`` is called after the head is out, so a slow model never delays it; when it
        fails, the head stands alone with a note saying so (a topic answer has no head: its model
        is opened before this is called, so a refusal is still an HTTP status). A topic answer
        with no supported sentence ends with the extractive answer, saying so."""
        head = self._head(prep)
        evidence = self._evidence(prep)
        if prep.preface:
            yield prep.preface + "\n\n"
        if head:
            yield head
        if prep.structured is not None:
            run.citations = structured_citations(prep.structured)
        started = time.monotonic()
        checker = SentenceChecker(evidence)
        run.tally = checker.tally
        gap = "\n\n" if head else ""  # what goes before the next kept sentence (its predecessor's spacing)
        try:
            for sentence in checker.feed(
                redact_stream(open_model(), self.visible_records(prep.caller), self.record_words(prep.caller))
            ):
                body = sentence.rstrip()
                yield gap + body
                gap = sentence[len(body) :]
        except LLMError as exc:
            self._observe("llm", time.monotonic() - started, outcome="error")
            if not head:
                raise
            run.model_error = exc.message
            yield "\n\n" + MODEL_FAILED.format(what=exc.message)
            return
        self._observe("llm", time.monotonic() - started, outcome="ok")
        self._observe(
            "checked",
            0.0,
            kept=str(checker.tally.sentences - checker.tally.removed),
            removed=str(checker.tally.removed),
        )
        kept = checker.text
        tally = checker.tally
        if tally.sentences and ((evidence.cite and not tally.cited) or (not head and not kept)):
            text, run.citations = self._extractive(prep)
            run.answerer = Answerer.EXTRACTIVE
            yield ("\n\n" if kept else "") + UNCHECKED + "\n\n" + text.split("\n", 2)[2]
        elif not head:
            run.citations = select_citations(kept, self._given(prep), prep.question)
            quoted, run.citations = self._quoted(prep, run.citations)
            yield "\n\n" + quoted

    # -- public ----------------------------------------------------------
    def answer(
        self,
        question: str,
        caller: Caller,
        conversation_id: str | None = None,
        mode: str | None = None,
        *,
        store: bool = True,
        history: Sequence[Turn] = (),
        drop_filters: Sequence[str] = (),
    ) -> ChatAnswer:
        """Answer in one piece. ``store=False`` keeps a first question out of the history;
        ``history`` is a conversation the client keeps (the OpenAI protocol), used without one;
        ``drop_filters`` names understood filters (their chip keys) to leave out."""
        prep = self._prepare(question, caller, conversation_id, mode, store, history, drop_filters)
        answerer = self._answerer(prep)
        if answerer != Answerer.LLM:
            return self._finish(prep, *self._direct_text(prep, answerer), answerer)
        llm = self.llm
        assert llm is not None
        messages = self._messages(prep)
        if self._head(prep):

            def opened() -> Iterator[str]:
                return iter([llm.complete(messages)])
        else:
            started = time.monotonic()
            try:  # a topic answer's model failure is the request's failure (there is nothing else to show)
                reply = llm.complete(messages)
            except LLMError:
                self._observe("llm", time.monotonic() - started, outcome="error")
                raise

            def opened() -> Iterator[str]:
                return iter([reply])

        run = _Run(answerer)
        text = "".join(self._compose(prep, opened, run))
        return self._finish(prep, text, run.citations, run.answerer, run.checked())

    def stream(
        self,
        question: str,
        caller: Caller,
        conversation_id: str | None = None,
        mode: str | None = None,
        *,
        store: bool = True,
        history: Sequence[Turn] = (),
        drop_filters: Sequence[str] = (),
    ) -> ChatStream:
        """Prepare and open the answer; iterate the result for ``ChatEvent``s."""
        prep = self._prepare(question, caller, conversation_id, mode, store, history, drop_filters)
        answerer = self._answerer(prep)
        run = _Run(answerer)
        pieces: Iterator[str]
        if answerer != Answerer.LLM:
            text, run.citations = self._direct_text(prep, answerer)
            pieces = iter([line + "\n" for line in text.split("\n")[:-1]] + [text.split("\n")[-1]])
            return ChatStream(self, prep, run, pieces)
        llm = self.llm
        assert llm is not None
        messages = self._messages(prep)
        if self._head(prep):
            return ChatStream(self, prep, run, self._compose(prep, lambda: llm.stream(messages), run))
        started = time.monotonic()
        try:  # opened now: a refusing endpoint is an HTTP status, before any byte is sent
            opened = llm.stream(messages)
        except LLMError:
            self._observe("llm", time.monotonic() - started, outcome="error")
            raise
        return ChatStream(self, prep, run, self._compose(prep, lambda: opened, run))


@dataclass
class _Run:
    """What composing an answer decided on the way: the answerer, citations, the checking tally."""

    answerer: Answerer
    citations: list[Citation] = field(default_factory=list)
    tally: Checked | None = None
    model_error: str | None = None

    def checked(self) -> dict[str, Any] | None:
        if self.tally is None:
            return None
        out = self.tally.to_dict()
        if self.model_error:
            out["model_error"] = self.model_error
        return out


def nothing_about_topic(result: StructuredResult) -> bool:
    """A list with a topic whose filters match records, none of them about the topic."""
    u = result.understanding
    return (
        u.kind == AnswerKind.LIST
        and relevance.restricts(u.topic)
        and bool(result.total)
        and not result.records
    )


def dropped_filters(result: StructuredResult, caller_id: int | None) -> str:
    """What a topic found nothing under the filters says: "None of the 21 tasks matching status: BLOCKED
    is about “SSO upgrade”; without status: BLOCKED, ..." """
    u = result.understanding
    total = result.total or 0
    return say(
        u.language,
        "none_about",
        total=total,
        topic=u.topic,
        noun=structured_render.noun(result.vocab, u.target_type, total, u.language),
        filters=structured_render.describe_all(result, caller_id),
    )


def structured_citations(result: StructuredResult) -> list[Citation]:
    """A structured answer's citations: its records, in order, each with the matching part or its start."""
    return [Citation(r.source_type, r.source_id, snippet(r.passage or r.content)) for r in result.records]


def declared_facets(rag: Any) -> list[Declaration]:
    """What every source declares (facets and meanings): the registry's sources and the SQL-query sources."""
    out = [s.declaration() for s in getattr(rag, "sources", ()) or ()]
    out += [source.declaration() for source in getattr(rag, "sql_source_definitions", lambda: [])()]
    return out


MAX_DROP = 20


def check_drop(drop: Any) -> tuple[str, ...]:
    """``drop_filters``: chip keys of understood filters to leave out (a list of short strings)."""
    if drop is None:
        return ()
    if (
        isinstance(drop, str)
        or not isinstance(drop, list | tuple)
        or len(drop) > MAX_DROP
        or not all(isinstance(k, str) and 0 < len(k) <= 64 for k in drop)
    ):
        raise InputError(
            f"drop_filters must be a list of at most {MAX_DROP} filter keys (strings of 1-64 characters)"
        )
    return tuple(drop)


class ChatStream:
    """Iterable of :class:`ChatEvent`; knows its conversation and retrieval before the first token."""

    def __init__(self, chat: Chat, prep: _Prepared, run: _Run, pieces: Iterator[str]) -> None:
        self._chat = chat
        self._prep = prep
        self._pieces = pieces
        self._run = run
        self.answerer = run.answerer
        self.conversation_id = prep.conversation_id if prep.store else None
        self.retrieval = prep.retrieval
        self.answer: ChatAnswer | None = None

    def __iter__(self) -> Iterator[ChatEvent]:
        parts: list[str] = []
        try:
            try:
                for piece in self._pieces:
                    parts.append(piece)
                    yield ChatEvent("token", text=piece)
            except LLMError as exc:
                yield ChatEvent("error", error=exc)
                return
            text = "".join(parts)
            if self.answerer == Answerer.LLM and not text.strip():
                yield ChatEvent(
                    "error", error=LLMError("the language model returned an empty answer", http_status=502)
                )
                return
            try:
                self.answer = self._chat._finish(
                    self._prep, text, self._run.citations, self._run.answerer, self._run.checked()
                )
            except RagError as exc:
                yield ChatEvent("error", error=exc)
                return
            yield ChatEvent("done", answer=self.answer)
        finally:
            close = getattr(self._pieces, "close", None)
            if close is not None:
                close()
