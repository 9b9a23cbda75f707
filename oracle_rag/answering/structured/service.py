"""The structured answerer: understood questions answered exactly, in SQL, within the caller's scope.

``AnswerService.understand`` runs the deterministic parser with the
caller's vocabulary; ``AnswerService.run`` executes what it understood:

* lookups read the record by id with the scope predicate (a record the caller
  may not see reads exactly like one that does not exist);
* lists count the matching records (``COUNT(*)`` over scope + facet
  predicate) and fetch up to ``list_limit`` of them: ranked by the rest of the
  question through the retriever (the predicate applied inside every search
  leg, before the top-k) when there is a rest, else in id order;
* counts are ``COUNT(*)``, per group ``GROUP BY`` the facet, over the same
  predicates.

The vocabulary (facet values among the records the caller may see, and the
organisational names of ids) is cached per scope for ``VOCABULARY_TTL_S``.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from oracle_rag.answering.structured import answers_sql as q
from oracle_rag.answering.structured import relevance
from oracle_rag.answering.structured.lexicon import STOPWORDS, fold
from oracle_rag.answering.structured.predicates import Predicate, build_predicate, facet_expression
from oracle_rag.answering.structured.understanding import Condition, QueryParser, Understanding
from oracle_rag.answering.structured.understood import AnswerKind
from oracle_rag.answering.structured.vocabulary import Vocabulary, build_vocabulary, words
from oracle_rag.callers.caller import Caller
from oracle_rag.engines import Engine, Filters, Scope, Where, facets_value
from oracle_rag.engines.records import lob_text
from oracle_rag.search.retriever import Retriever
from oracle_rag.sources.meanings import Declaration

VOCABULARY_TTL_S = 30.0
# A list with a topic reads the text of every matching record up to this many, to say how many are about it.
ABOUT_SCAN = 2000
log = logging.getLogger(__name__)

log = logging.getLogger("oracle_rag.answering.structured")


@dataclass(frozen=True)
class Record:
    """One record of a structured answer (chunk 0's text and the record's facets)."""

    source_type: str
    source_id: str
    content: str
    facets: dict[str, Any]
    passage: str = ""  # the part of the text that matched the question, when ranked
    anchor: str = ""  # "[TASK #42]", "[TICKETS #1042]": the type as its source names it and the row id

    def __post_init__(self) -> None:
        if not self.anchor:
            object.__setattr__(self, "anchor", f"[{self.source_type} #{self.source_id}]")

    @property
    def title(self) -> str:
        first = self.content.strip().split("\n", 1)[0]
        stored = f"[{self.source_type} #{self.source_id}]"
        for anchor in (self.anchor, stored):
            if first.upper().startswith(anchor.upper()):
                first = first[len(anchor) :].strip()
        return first


@dataclass
class StructuredResult:
    understanding: Understanding
    vocab: Vocabulary
    records: list[Record] = field(default_factory=list)
    total: int | None = None
    groups: list[tuple[Any, int]] = field(default_factory=list)
    missing_lookups: int = 0
    ranked_by: str = ""  # the topic that ordered the records ("" = id order)
    totals: list[tuple[str, int]] = field(default_factory=list)  # per type answered, when several
    about: int | None = (
        None  # with a topic: how many of the matching records are about it (None: not counted)
    )


# What the service is given per source type (sources/meanings.py); the old name stays for callers.
Declared = Declaration


# The names of person ids (oracle_rag/callers/people.py): called when the vocabulary's names are read.
People = Callable[[], Mapping[int, str]]


class AnswerService:
    def __init__(
        self,
        engine: Engine,
        declared: Iterable[Declaration] | Callable[[], Iterable[Declaration]],
        *,
        list_limit: int = 20,
        ttl_s: float = VOCABULARY_TTL_S,
        people: People | None = None,
    ) -> None:
        """``declared``: the source types' declarations, or a function returning them (read again with the
        vocabulary, so a source registered later, the reference app's once its tables exist, joins).
        ``people``: the names of person ids, used for every person facet of every type."""
        self.engine = engine
        self._declared = declared if callable(declared) else list(declared)
        self.people = people
        self.list_limit = list_limit
        self.ttl_s = ttl_s
        self._lock = threading.Lock()
        self._cache: dict[Scope, tuple[float, Vocabulary, QueryParser]] = {}
        self._labels: tuple[float, dict[str, dict[Any, str]]] | None = None
        self._indexed: set[str] = set()

    @property
    def declared(self) -> list[Declaration]:
        found = self._declared() if callable(self._declared) else self._declared
        return [d for d in found if d.facets or d.meanings.nouns]

    def where(self, pred: Predicate) -> Where:
        return Where(self.engine.text(pred.sql), dict(pred.binds))

    # -- vocabulary ----------------------------------------------------------------------
    def parser(self, scope: Scope) -> QueryParser:
        # One vocabulary per visible set: see-all callers share one; others differ by id and groups.
        key = Scope(-1, True) if scope.see_all else scope
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
            if hit is not None and now - hit[0] < self.ttl_s:
                return hit[2]
        vocab = self._load(scope)
        parser = QueryParser(vocab)
        with self._lock:
            if len(self._cache) > 256:
                self._cache.clear()
            self._cache[key] = (now, vocab, parser)
        return parser

    def _index_facets(self, declared: list[Declaration]) -> None:
        """Once per process and facet: an index per declared facet on the embedded
        engine (answers_sql.FACET_INDEX).

        A read-only database or a busy writer leaves it for the next process: answers are the same
        without it, only slower on large sources."""
        facets = {
            f.name: f
            for d in declared
            for f in d.facets
            if f.kind in ("enum", "ref", "date") and f.name not in self._indexed
        }
        if not facets:
            return
        self._indexed.update(facets)
        try:
            with self.engine.begin() as conn:
                for name, facet in facets.items():
                    conn.execute(self.engine.statement(q.facet_index(name, facet_expression(facet))))
        except sa.exc.SQLAlchemyError as exc:
            log.info("facet indexes not made now (%s)", type(exc).__name__)

    def _load(self, scope: Scope) -> Vocabulary:
        declared = self.declared
        self._index_facets(declared)
        values: dict[str, set[Any]] = {}
        held: dict[str, dict[str, set[Any]]] = {}  # per type: a value's words mean it only where it is held
        with self.engine.connect() as conn:
            labels = self._names(conn, declared)
            for d in declared:
                for facet in d.facets:
                    if facet.kind != "enum":
                        continue
                    rows = conn.execute(
                        self.engine.statement(q.grouped(q.FACET_VALUES, facet_expression(facet))),
                        {"types": [d.source_type], **scope.binds()},
                    )
                    found = {r[0] for r in rows if r[0] is not None}
                    held.setdefault(d.source_type, {})[facet.name] = found
                    values.setdefault(facet.name, set()).update(found)
        return build_vocabulary(declared, values, labels, held)

    def _names(self, conn: sa.Connection, declared: list[Declaration]) -> dict[str, dict[Any, str]]:
        now = time.monotonic()
        if self._labels is not None and now - self._labels[0] < self.ttl_s:
            return self._labels[1]
        labels: dict[str, dict[Any, str]] = {}
        people = dict(self.people()) if self.people is not None else {}
        for d in declared:
            for person in d.person_facets:  # every person facet of every type: the deployment's people
                labels.setdefault(person.name, {}).update(people)
            if d.labels is not None:
                try:
                    found = d.labels(conn)
                except sa.exc.DBAPIError as exc:
                    # A source whose name tables cannot be read now: its values go unnamed, answers
                    # still work.
                    log.warning(
                        "names for %s facets unavailable [%s]", d.source_type, type(exc.orig).__name__
                    )
                    conn.rollback()
                    continue
                for facet, names in found.items():
                    labels.setdefault(facet, {}).update(names)
        self._labels = (now, labels)
        return labels

    def understand(
        self, question: str, caller: Caller, *, today: dt.date | None = None, drop: Sequence[str] = ()
    ) -> tuple[Understanding, Vocabulary]:
        parser = self.parser(caller.scope())
        return parser.parse(question, caller.employee_id, today, tuple(drop)), parser.vocab

    # -- answering -----------------------------------------------------------------------
    def predicate(
        self,
        u: Understanding,
        vocab: Vocabulary,
        conditions: Sequence[Condition] | None = None,
        source_type: str | None = None,
    ) -> Predicate:
        source_type = source_type or u.target_type
        chosen = u.conditions_of(source_type) if conditions is None else conditions
        return build_predicate(chosen, vocab.facets, source_type)

    def run(
        self,
        u: Understanding,
        vocab: Vocabulary,
        caller: Caller,
        *,
        mode: str = "hybrid",
        settings: Any = None,
    ) -> StructuredResult:
        result = StructuredResult(u, vocab)
        if u.kind == AnswerKind.NOTICE:
            return result
        scope = caller.scope()
        with self.engine.connect() as conn:
            if u.kind == AnswerKind.LOOKUP:
                groups = u.lookup_groups or list(range(len(u.lookups)))
                found: set[int] = set()
                for (source_type, source_id), group in zip(u.lookups, groups, strict=False):
                    record = self._get(conn, vocab, scope, source_type, source_id, u.topic)
                    if record is not None:
                        result.records.append(record)
                        found.add(group)
                result.missing_lookups = len(set(groups) - found)
                return result
            types: list[str | None] = list(u.targets) or [u.target_type]
            limit = self.list_limit
            if u.kind == AnswerKind.COUNT:
                limit = min(limit, settings.top_k if settings is not None else 8)
            merged: dict[Any, int] = {}
            total = 0
            for one in types:
                n, groups_of, records, about = self._one_type(
                    conn, u, vocab, caller, one, mode, limit, settings
                )
                total += n
                if about is not None:
                    result.about = (result.about or 0) + about
                if one is not None:
                    result.totals.append((one, n))
                for value, count in groups_of:
                    merged[value] = merged.get(value, 0) + count
                result.records.extend(records)
                result.ranked_by = result.ranked_by or (u.topic if records and u.topic else "")
            result.total = total
            if u.group_by:
                grouped: list[tuple[Any, int]] = list(merged.items())
                facet = vocab.facets[u.group_by]
                if (
                    u.superlative
                    and facet.person
                    and not any(c.facet == u.group_by and c.op == "null" for c in u.conditions)
                ):
                    grouped = [g for g in grouped if g[0] is not None]  # nobody is not a person
                reverse = u.superlative != "fewest"
                grouped.sort(
                    key=lambda g: ((-g[1] if reverse else g[1]), vocab.label(u.group_by or "", g[0]))
                )
                result.groups = grouped
        return result

    def _one_type(
        self,
        conn: sa.Connection,
        u: Understanding,
        vocab: Vocabulary,
        caller: Caller,
        source_type: str | None,
        mode: str,
        limit: int,
        settings: Any,
    ) -> tuple[int, list[tuple[Any, int]], list[Record], int | None]:
        """Total, groups and records of one type: COUNT(*), GROUP BY, then ranked or id-order records;
        with a topic, only the records about it and how many of the matching ones are
        (``relevance``; None when more match than :data:`ABOUT_SCAN`, then among the ranked only)."""
        scope = caller.scope()
        pred = self.predicate(u, vocab, source_type=source_type)
        where = self.where(pred)
        binds = {**pred.binds, **scope.binds()}
        total = int(conn.execute(self.engine.statement(q.COUNT_RECORDS, where), binds).scalar_one())
        groups: list[tuple[Any, int]] = []
        if u.kind == AnswerKind.COUNT and u.group_by:
            expr = facet_expression(vocab.facets[u.group_by])
            rows = conn.execute(
                self.engine.statement(q.grouped(q.COUNT_GROUPS, expr), where), binds
            ).fetchall()
            groups = [(_plain(r[0]), int(r[1])) for r in rows]
        if (u.kind == AnswerKind.COUNT and not u.topic) or total == 0:
            return total, groups, [], None
        ranked: list[Record] = []
        if u.topic:
            ranked = self._ranked(conn, u, vocab, source_type, where, caller, mode, limit, settings)
        if relevance.restricts(u.topic):
            about, count = self._about(conn, u.topic, ranked, where, binds, total, limit, vocab)
            return total, groups, about, count
        if len(ranked) < min(limit, total) and u.kind == AnswerKind.LIST:
            seen = {(r.source_type, r.source_id) for r in ranked}
            rows = conn.execute(
                self.engine.statement(q.LIST_RECORDS, where), {**binds, "limit": limit + len(seen)}
            ).fetchall()
            for r in rows:
                if (r[0], str(r[1])) not in seen and len(ranked) < limit:
                    ranked.append(self._record(vocab, r[0], r[1], r[2], r[3]))
        return total, groups, ranked, None

    def _about(
        self,
        conn: sa.Connection,
        topic: str,
        ranked: list[Record],
        where: Where,
        binds: dict[str, Any],
        total: int,
        limit: int,
        vocab: Vocabulary,
    ) -> tuple[list[Record], int | None]:
        """The records about ``topic`` (the ranked ones first, in their order; then any other matching one
        about it), and how many of the ``total`` matching records are: every matching record's text is
        read when there are at most :data:`ABOUT_SCAN` of them."""
        stems = relevance.topic_stems(topic)

        def about(record: Record) -> bool:
            return relevance.holds(stems, record.content + "\n" + record.passage)

        kept = [r for r in ranked if about(r)]
        if total > ABOUT_SCAN:
            return kept, None
        seen = {(r.source_type, r.source_id) for r in kept}
        rows = conn.execute(
            self.engine.statement(q.LIST_RECORDS, where), {**binds, "limit": total}
        ).fetchall()
        found = [
            r for r in rows if (str(r[0]), str(r[1])) not in seen and relevance.holds(stems, lob_text(r[2]))
        ]
        shown = [self._record(vocab, r[0], r[1], r[2], r[3]) for r in found[: max(0, limit - len(kept))]]
        return (kept + shown)[:limit], len(kept) + len(found)

    @staticmethod
    def _record(
        vocab: Vocabulary, source_type: Any, source_id: Any, content: Any, facets: Any, passage: str = ""
    ) -> Record:
        t, i = str(source_type), str(source_id)
        return Record(t, i, lob_text(content), facets_value(facets), passage, vocab.anchor_of(t, i))

    def _get(
        self,
        conn: sa.Connection,
        vocab: Vocabulary,
        scope: Scope,
        source_type: str,
        source_id: str,
        topic: str,
    ) -> Record | None:
        rows = conn.execute(
            self.engine.statement(q.CHUNKS_OF_ONE),
            {"source_type": source_type, "source_id": source_id, **scope.binds()},
        ).fetchall()
        if not rows:
            return None
        contents = [lob_text(r[3]) for r in rows]
        return self._record(
            vocab, rows[0][0], rows[0][1], rows[0][3], rows[0][4], best_passage(contents, topic)
        )

    def _ranked(
        self,
        conn: sa.Connection,
        u: Understanding,
        vocab: Vocabulary,
        source_type: str | None,
        where: Where,
        caller: Caller,
        mode: str,
        limit: int,
        settings: Any,
    ) -> list[Record]:
        if settings is None:
            return []
        retriever = Retriever(self.engine, settings)
        types = (source_type,) if source_type else ()
        hits = retriever.search(u.topic, limit, caller, mode, Filters(source_types=types), where=where)
        order: list[tuple[str, str]] = []
        passages: dict[tuple[str, str], str] = {}
        for h in hits:
            key = (h.source_type, h.source_id)
            if key not in passages:
                order.append(key)
                passages[key] = best_passage([h.content], u.topic)
        by_type: dict[str, list[str]] = {}
        for t, i in order:
            by_type.setdefault(t, []).append(i)
        found: dict[tuple[str, str], Record] = {}
        for source_type, ids in by_type.items():
            rows = conn.execute(
                self.engine.statement(q.RECORDS_BY_ID),
                {"source_type": source_type, "ids": ids, **caller.scope().binds()},
            ).fetchall()
            for r in rows:
                key = (str(r[0]), str(r[1]))
                found[key] = self._record(vocab, r[0], r[1], r[2], r[3], passages.get(key, ""))
        return [found[k] for k in order if k in found]


def _plain(value: Any) -> Any:
    """A group value as the facets hold it (Oracle NUMBER arrives as Decimal or float)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if hasattr(value, "as_integer_ratio") and not isinstance(value, int | float):
        number = float(value)
        return int(number) if number.is_integer() else number
    return value


def best_passage(contents: Sequence[str], topic: str, max_lines: int = 3) -> str:
    """The lines of a record that share the most words with ``topic`` (its header without one)."""
    wanted = {w for w in words(topic) if w not in STOPWORDS and len(w) > 2}
    lines = [line for text in contents for line in text.split("\n")[1:] if line.strip()]
    if not wanted or not lines:
        return ""
    scored = []
    for i, line in enumerate(lines):
        have = set(words(line))
        stems = {w[:5] for w in have}
        score = len(wanted & have) + 0.5 * len({w[:5] for w in wanted} & stems)
        if fold(line).startswith(("comments:", "comentarios:")):
            score += 0.5 if {"comment", "comments", "comentario", "comentarios"} & wanted else 0
        scored.append((score, i, line))
    best = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:max_lines]
    if not best:
        return ""
    picked = sorted(best, key=lambda s: s[1])
    out = [line for _, _, line in picked]
    # a "Comments:" header alone says nothing: show the comments after it
    if any(fold(line).startswith(("comments:", "comentarios:")) for line in out):
        start = next(i for _, i, line in picked if fold(line).startswith(("comments:", "comentarios:")))
        out = [lines[j] for j in range(start, min(len(lines), start + 1 + 6))]
    return "\n".join(out)
