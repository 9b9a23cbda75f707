"""Query understanding: a question to lookups, facet conditions, a count and a topic.

Deterministic and model-free, run before retrieval. In order:

1. id mentions ("task 42", "#42", "TASK-42", "tarea 42", "sprint 7", "project 3")
   and ISO dates after "before"/"after";
2. words, accent- and case-folded; "per <facet>", "por <faceta>", "who ... most";
3. the longest phrase at each position among the vocabulary (facet values,
   names, synonyms) and the intent words (counts, negation, "my", due dates);
   a value that needs its cue ("active" of a sprint) counts only near it;
4. negation ("not done", "no bloqueadas"), "my"/"mis"/"tengo" as the caller,
   "overdue", "due this week", "unassigned";
5. a value that is not known after a cue ("project Atlas Biling") becomes a
   notice with the closest known name, never a silent guess;
6. what is left, minus filler words, is the topic that ranks the records.

The result names facets only through the vocabulary, so a predicate built
from it can only use declared facet names (``answers.predicates``).
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from dataclasses import dataclass, field
from typing import Any

from . import lexicon as lx
from .lexicon import fold
from .vocabulary import Phrase, Term, Vocabulary

_ID_PATTERNS = [
    ("TASK", re.compile(r"\b(?:tasks?|tareas?|tickets?|issues?|bugs?)\s*(?:#|n[o\u00ba\u00b0]\.?|num(?:ero)?\.?|"
                        r"n[u\u00fa]mero)?\s*-?\s*(\d{1,9})\b", re.IGNORECASE)),
    ("TASK", re.compile(r"(?<![\w#])#\s?(\d{1,9})\b")),
    ("SPRINT", re.compile(r"\bsprints?\s*#?\s*-?\s*(\d{1,9})\b", re.IGNORECASE)),
    ("PROJECT", re.compile(r"\b(?:projects?|proyectos?)\s*#?\s*-?\s*(\d{1,9})\b", re.IGNORECASE)),
]
_DATE_BOUND = re.compile(r"\b(before|until|by|antes\s+del?|hasta\s+el|hasta|after|since|despu[e\u00e9]s\s+del?|"
                         r"desde\s+el|desde)\s+(\d{4}-\d{2}-\d{2})\b", re.IGNORECASE)
_WORD = re.compile(r"[^\W_]+")
_QUOTED = re.compile(r"[\"'\u2018\u2019\u201c\u201d\u00ab\u00bb]([^\"'\u2018\u2019\u201c\u201d\u00ab\u00bb]{2,60})"
                     r"[\"'\u2018\u2019\u201c\u201d\u00ab\u00bb]")
CUE_DISTANCE = 3


@dataclass(frozen=True)
class Condition:
    """One predicate on a facet. ``op``: in, not_in, null, lt (dates), range (dates, inclusive)."""

    facet: str
    op: str
    values: tuple[Any, ...]
    key: str  # conditions sharing a key are one chip ("overdue" = due before today + not done)
    text: str  # the words of the question it came from

    def to_dict(self) -> dict[str, Any]:
        return {"facet": self.facet, "op": self.op, "values": list(self.values), "key": self.key, "text": self.text}


@dataclass(frozen=True)
class Notice:
    """A value the question named that the data does not have."""

    facet: str
    text: str
    suggestion: str | None

    def message(self, label: str, lang: str = "en") -> str:
        if lang == "es":
            named = f"no hay ningún {label} llamado '{self.text}'"
            return f"{named} \u2014 ¿quiso decir {self.suggestion}?" if self.suggestion else named
        named = f"no {label} named '{self.text}'"
        return f"{named} \u2014 did you mean {self.suggestion}?" if self.suggestion else named

    def to_dict(self, label: str, lang: str = "en") -> dict[str, Any]:
        return {"facet": self.facet, "text": self.text, "suggestion": self.suggestion,
                "message": self.message(label, lang)}


@dataclass
class Understanding:
    question: str
    language: str = "en"
    lookups: list[tuple[str, str]] = field(default_factory=list)
    conditions: list[Condition] = field(default_factory=list)
    target_type: str | None = None
    count: bool = False
    group_by: str | None = None
    superlative: str | None = None  # "most" | "fewest"
    topic: str = ""
    notices: list[Notice] = field(default_factory=list)
    dropped: tuple[str, ...] = ()

    other_aggregate: bool = False  # "average", "sum of hours": not a count of records

    @property
    def kind(self) -> str:
        if self.notices:
            return "notice"
        if self.lookups:
            return "lookup"
        if self.other_aggregate:
            return "topic"
        if self.count or self.group_by:
            # "how many tasks mention invoices": a topic is not a filter, so there is nothing exact to count
            if self.topic and not self.conditions and not self.group_by:
                return "topic"
            return "count"
        if self.conditions:
            return "list"
        return "topic"

    @property
    def structured(self) -> bool:
        return self.kind != "topic"

    def keys(self) -> list[str]:
        return list(dict.fromkeys(c.key for c in self.conditions))


@dataclass
class _Token:
    text: str
    word: str
    start: int
    end: int
    used: str | None = None

    @property
    def capitalised(self) -> bool:
        return self.text[:1].isupper()


@dataclass
class _Match:
    start: int  # token index
    end: int  # exclusive
    meanings: list[Any]


def _lexicon_table() -> dict[Phrase, list[Any]]:
    table: dict[Phrase, list[Any]] = {}
    groups: list[tuple[str, tuple[Phrase, ...]]] = [
        ("count", lx.COUNT), ("negation", lx.NEGATION), ("caller", lx.CALLER), ("overdue", lx.OVERDUE),
        ("no_due", lx.NO_DUE_DATE), ("most", lx.MOST), ("fewest", lx.FEWEST),
    ]
    groups += [(f"window:{name}", items) for name, items in lx.DUE_WINDOWS.items()]
    for name, items in groups:
        for phrase in items:
            table.setdefault(phrase, []).append(name)
    return table


_LEXICON = _lexicon_table()


def language_of(words: list[str]) -> str:
    es = sum(1 for w in words if w in lx.SPANISH)
    en = sum(1 for w in words if w in lx.ENGLISH)
    return "es" if es > en else "en"


class QueryParser:
    """Turns questions into :class:`Understanding` with one :class:`Vocabulary`."""

    def __init__(self, vocab: Vocabulary) -> None:
        self.vocab = vocab
        self.table: dict[Phrase, list[Any]] = {p: list(m) for p, m in _LEXICON.items()}
        for phrase, terms in vocab.terms.items():
            self.table.setdefault(phrase, []).extend(terms)
        self.max_len = max((len(p) for p in self.table), default=1)
        self.cues: dict[str, list[str]] = {}
        for facet in vocab.facets.values():
            for cue in facet.cues:
                self.cues.setdefault(fold(cue), []).append(facet.name)

    # -- the steps -----------------------------------------------------------------------
    def parse(self, question: str, caller_id: int | None = None, today: dt.date | None = None,
              drop: tuple[str, ...] = ()) -> Understanding:
        today = today or dt.date.today()
        out = Understanding(question, dropped=tuple(drop))
        self._language = "en"
        self._named_facets: set[str] = set()
        spans: list[tuple[int, int, str]] = []
        mentions = self._mentions(question, spans)
        conditions: list[Condition] = []
        self._date_bounds(question, spans, conditions)
        tokens = [_Token(m.group(0), fold(m.group(0)), m.start(), m.end()) for m in _WORD.finditer(question)]
        for tok in tokens:
            for start, end, why in spans:
                if tok.start < end and tok.end > start:
                    tok.used = why
        out.language = self._language = language_of([t.word for t in tokens])
        named = {self.vocab.type_words[t.word] for t in tokens if t.word in self.vocab.type_words}
        self._named_facets = {f for t in named for f in self.vocab.types.get(t, ())}
        out.other_aggregate = any(t.word in lx.OTHER_AGGREGATE for t in tokens)
        self._group_by(tokens, out)
        matches = self._phrases(tokens)
        self._interpret(tokens, matches, out, conditions, caller_id, today)
        types = self._types(tokens)
        self._mentions_to_lookups(tokens, mentions, types, out, conditions)
        self._notices(question, tokens, out)
        out.conditions = self._merge([c for c in conditions if c.key not in drop])
        out.target_type = self._target(out, types)
        out.topic = " ".join(t.text for t in tokens if t.used is None and t.word not in lx.STOPWORDS
                             and t.word not in self.vocab.type_words and t.word not in self.cues)
        return out

    def _mentions(self, text: str, spans: list[tuple[int, int, str]]) -> list[tuple[str, str, int, int]]:
        found: list[tuple[str, str, int, int]] = []
        for source_type, pattern in _ID_PATTERNS:
            if source_type not in self.vocab.types and source_type != "TASK":
                continue
            for m in pattern.finditer(text):
                if any(m.start() < e and m.end() > s for s, e, _ in spans):
                    continue
                spans.append((m.start(), m.end(), "id"))
                found.append((source_type, str(int(m.group(1))), m.start(), m.end()))
        found.sort(key=lambda f: f[2])
        return found

    def _date_bounds(self, text: str, spans: list[tuple[int, int, str]], conditions: list[Condition]) -> None:
        due = self._due_facet()
        if due is None:
            return
        for m in _DATE_BOUND.finditer(text):
            try:
                day = dt.date.fromisoformat(m.group(2))
            except ValueError:
                continue
            lead = fold(m.group(1)).split()[0]
            spans.append((m.start(), m.end(), "date"))
            if lead in ("before", "until", "by", "antes", "hasta"):
                conditions.append(Condition(due, "lt", (day.isoformat(),), f"{due}:before", m.group(0)))
            else:
                conditions.append(Condition(due, "range", (day.isoformat(), "9999-12-31"), f"{due}:after",
                                            m.group(0)))

    def _due_facet(self) -> str | None:
        return next((f.name for f in self.vocab.facets.values() if f.due), None)

    def _person_facet(self) -> str | None:
        return next((f.name for f in self.vocab.facets.values() if f.person), None)

    def _done_facet(self) -> tuple[str, tuple[Any, ...]] | None:
        return next(((f.name, f.done) for f in self.vocab.facets.values() if f.done), None)

    def _group_facets(self, word: str) -> list[str]:
        return [n for n in self.cues.get(word, []) if not self.vocab.facets[n].cue_required]

    def _group_by(self, tokens: list[_Token], out: Understanding) -> None:
        """ "per project", "por estado", "each developer"; "who has the most", "which sprint has the most"."""
        free = [i for i, t in enumerate(tokens) if t.used is None]
        words = [tokens[i].word for i in free]
        for lead in sorted(lx.GROUP_LEAD, key=len, reverse=True):
            n = len(lead)
            for j in range(len(words) - n):
                if tuple(words[j:j + n]) != lead:
                    continue
                facets = self._group_facets(words[j + n])
                if not facets or tokens[free[j + n]].used is not None:
                    continue
                out.group_by = facets[0]
                for k in range(j, j + n + 1):
                    tokens[free[k]].used = "group"
                return
        superlative = None
        for i, t in enumerate(tokens):
            if t.used is None and (t.word,) in lx.MOST:
                superlative, at = "most", i
            elif t.used is None and (t.word,) in lx.FEWEST and t.word != "menos":
                superlative, at = "fewest", i
        if superlative is None:
            return
        person = self._person_facet()
        for i, t in enumerate(tokens):
            if t.used is not None:
                continue
            if (t.word,) in lx.WHO and person and i < at:
                out.group_by, out.superlative = person, superlative
                t.used = tokens[at].used = "group"
                return
            facets = self._group_facets(t.word)
            if facets and i < at:
                out.group_by, out.superlative = facets[0], superlative
                t.used = tokens[at].used = "group"
                return

    def _phrases(self, tokens: list[_Token]) -> list[_Match]:
        """Longest phrase first at each position, over the words nothing has claimed."""
        matches: list[_Match] = []
        i = 0
        while i < len(tokens):
            if tokens[i].used is not None:
                i += 1
                continue
            found = None
            for n in range(min(self.max_len, len(tokens) - i), 0, -1):
                window = tokens[i:i + n]
                if any(t.used is not None for t in window):
                    continue
                meanings = self.table.get(tuple(t.word for t in window))
                if meanings:
                    found = _Match(i, i + n, meanings)
                    break
            if found is None:
                i += 1
                continue
            matches.append(found)
            i = found.end
        return matches

    def _cue_distance(self, tokens: list[_Token], match: _Match, facet: str) -> int:
        best = 10**6
        for j, t in enumerate(tokens):
            if facet in self.cues.get(t.word, []) and t.used in (None, "cue", "type"):
                best = min(best, match.start - j if j < match.start else j - (match.end - 1) if j >= match.end else 0)
        return best

    def _resolve(self, tokens: list[_Token], match: _Match) -> list[Any]:
        """The meanings that survive: a cue-needing value only near its cue, and then it wins."""
        lexical = [m for m in match.meanings if isinstance(m, str)]
        terms = [m for m in match.meanings if isinstance(m, Term)]
        near = []
        plain = []
        if len(match.meanings) and match.end - match.start == 1:
            word = tokens[match.start].word
            terms = [t for t in terms if word not in lx.FALSE_FRIENDS.get(self._language, ())]
        for term in terms:
            facet = self.vocab.facets[term.facet]
            if facet.cue_required:
                distance = self._cue_distance(tokens, match, term.facet)
                if distance <= CUE_DISTANCE:
                    near.append((distance, term))
            else:
                plain.append(term)
        if near:
            near.sort(key=lambda x: x[0])
            return [near[0][1]]
        if "caller" in lexical and plain and all(t.kind == "partial" for t in plain):
            first = tokens[match.start]
            return plain[:1] if (first.capitalised and match.start > 0) else ["caller"]
        if plain:
            preferred = [t for t in plain if t.facet in self._named_facets]
            return (preferred or plain)[:1]
        return lexical[:1]

    def _negated(self, tokens: list[_Token], start: int) -> bool:
        j = start - 1
        gap = 0
        while j >= 0 and gap <= 3:
            t = tokens[j]
            if t.used == "negation":
                return True
            if t.used is None and (t.word,) in lx.NEGATION:
                t.used = "negation"
                return True
            if t.used is None and t.word in lx.NEGATION_GAP:
                j -= 1
                gap += 1
                continue
            if t.used == "type":
                j -= 1
                gap += 1
                continue
            return False
        return False

    def _interpret(self, tokens: list[_Token], matches: list[_Match], out: Understanding,
                   conditions: list[Condition], caller_id: int | None, today: dt.date) -> None:
        due = self._due_facet()
        person = self._person_facet()
        done = self._done_facet()
        for match in matches:
            meanings = self._resolve(tokens, match)
            text = " ".join(t.text for t in tokens[match.start:match.end])
            if not meanings:
                continue
            meaning = meanings[0]
            used = "value"
            if isinstance(meaning, Term):
                if meaning.kind == "partial" and self._misspelt(tokens, match, meaning, out):
                    continue
                negated = self._negated(tokens, match.start)
                facet = meaning.facet
                if meaning.kind == "open":
                    conditions.append(Condition(facet, "in" if negated else "not_in", meaning.values, facet, text))
                elif meaning.kind == "null":
                    conditions.append(Condition(facet, "not_null" if negated else "null", (), facet, text))
                else:
                    conditions.append(Condition(facet, "not_in" if negated else "in", meaning.values, facet, text))
            elif meaning == "count":
                out.count = True
                used = "count"
            elif meaning == "caller" and person and caller_id is not None:
                negated = self._negated(tokens, match.start)
                conditions.append(Condition(person, "not_in" if negated else "in", (caller_id,), person, text))
            elif meaning == "overdue" and due:
                conditions.append(Condition(due, "lt", (today.isoformat(),), "overdue", text))
                if done and done[0] in self.vocab.facets:
                    conditions.append(Condition(done[0], "not_in", done[1], "overdue", text))
            elif meaning == "no_due" and due:
                conditions.append(Condition(due, "null", (), due, text))
            elif isinstance(meaning, str) and meaning.startswith("window:") and due:
                lo, hi = _window(meaning.split(":", 1)[1], today)
                conditions.append(Condition(due, "range", (lo.isoformat(), hi.isoformat()), due, text))
            elif meaning in ("negation", "most", "fewest"):
                continue  # claimed by the value after it, or by a group
            else:
                continue
            for t in tokens[match.start:match.end]:
                t.used = used

    def _misspelt(self, tokens: list[_Token], match: _Match, term: Term, out: Understanding) -> bool:
        """ "Atlas Biling", "Ana Peres": a known first word followed by an unknown capitalised one."""
        nxt = match.end
        if nxt >= len(tokens):
            return False
        t = tokens[nxt]
        if t.used is not None or not t.capitalised or t.word in lx.STOPWORDS or t.word in self.vocab.type_words \
                or t.word in self.cues:
            return False
        text = " ".join(x.text for x in tokens[match.start:nxt + 1])
        facet, suggestion = self._closest([term.facet], text)
        out.notices.append(Notice(facet, text, suggestion))
        for x in tokens[match.start:nxt + 1]:
            x.used = "notice"
        return True

    def _types(self, tokens: list[_Token]) -> list[str]:
        types = []
        for t in tokens:
            kind = self.vocab.type_words.get(t.word)
            if kind and t.used in (None, "cue"):
                types.append(kind)
                if t.used is None:
                    t.used = "type"
        return list(dict.fromkeys(types))

    def _mentions_to_lookups(self, tokens: list[_Token], mentions: list[tuple[str, str, int, int]],
                             types: list[str], out: Understanding, conditions: list[Condition]) -> None:
        """Task ids are lookups; a sprint or project id is a lookup of that record, unless the
        question is about its tasks ("what is blocked in sprint 7") — then it is a filter."""
        refers = {f.refers_to: f.name for f in self.vocab.facets.values() if f.refers_to}
        other = [c for c in conditions if self.vocab.facets[c.facet].refers_to is None]
        task_signals = bool(other or out.count or out.group_by or "TASK" in types)
        for source_type, source_id, start, _end in mentions:
            facet = refers.get(source_type)
            if source_type == "TASK" or facet is None:
                out.lookups.append((source_type, source_id))
                continue
            before = [t for t in tokens if t.end <= start]
            within = bool(before) and before[-1].word in lx.WITHIN
            record_words = any(t.word in lx.RECORD_WORDS for t in tokens)
            if task_signals or (within and not record_words):
                if int(source_id) in self.vocab.values.get(facet, set()):
                    conditions.append(Condition(facet, "in", (int(source_id),), facet,
                                                f"{source_type.lower()} {source_id}"))
                else:
                    out.notices.append(Notice(facet, f"{source_type.title()} {source_id}", None))
            else:
                out.lookups.append((source_type, source_id))
        if out.lookups or task_signals:
            return
        # a project or sprint named (not by id) with nothing else asked: the record itself
        named = [c for c in conditions if self.vocab.facets[c.facet].refers_to and c.op == "in"]
        record_words = any(t.word in lx.RECORD_WORDS for t in tokens)
        if named and len(named) == 1 and not [t for t in types if t != self.vocab.facets[named[0].facet].refers_to]:
            cond = named[0]
            first = next((t for t in tokens if t.text in cond.text.split()), None)
            before = [t for t in tokens if first is not None and t.end <= first.start]
            within = bool(before) and before[-1].word in lx.WITHIN
            if record_words or not within:
                refers_to = self.vocab.facets[cond.facet].refers_to
                assert refers_to is not None
                out.lookups.extend((refers_to, str(v)) for v in cond.values)
                conditions.remove(cond)

    def _notices(self, question: str, tokens: list[_Token], out: Understanding) -> None:
        """Capitalised or quoted words after (or before) a facet's cue that name nothing known."""
        quoted = [(m.start(1), m.end(1)) for m in _QUOTED.finditer(question)]
        for i, t in enumerate(tokens):
            if t.used not in (None, "type", "cue"):
                continue
            facets = [n for n in self.cues.get(t.word, []) if self.vocab.labels.get(n)]
            facets += [n for n in self.cues.get(t.word, []) if self.vocab.facets[n].kind == "enum"
                       and not self.vocab.facets[n].cue_required and n not in facets]
            if not facets:
                continue
            for side in (1, -1):
                phrase = self._unknown_phrase(tokens, i, side, quoted)
                if not phrase:
                    continue
                text = " ".join(tokens[k].text for k in sorted(phrase))
                facet, suggestion = self._closest(facets, text)
                for k in phrase:
                    tokens[k].used = "notice"
                t.used = "notice"
                out.notices.append(Notice(facet, text, suggestion))
                break
        self._stray_names(tokens, out)

    def _unknown_phrase(self, tokens: list[_Token], i: int, side: int, quoted: list[tuple[int, int]]) -> list[int]:
        picked: list[int] = []
        k = i + side
        while 0 <= k < len(tokens) and len(picked) < 4:
            t = tokens[k]
            if t.used is not None:
                break
            inside_quotes = any(s <= t.start and t.end <= e for s, e in quoted)
            if not (t.capitalised or inside_quotes) or (t.word in lx.STOPWORDS and not inside_quotes):
                break
            if t.word in self.vocab.type_words or t.word in self.cues:
                break
            picked.append(k)
            k += side
        if picked and side == -1 and min(picked) == 0 and len(picked) == 1:
            return []  # the first word of a sentence is capitalised anyway
        return picked

    def _closest(self, facets: list[str], text: str) -> tuple[str, str | None]:
        folded = fold(text)
        best: tuple[float, str, str | None] = (0.0, facets[0], None)
        for name in facets:
            names = self.vocab.labels.get(name) or {v: str(v) for v in self.vocab.values.get(name, ())}
            for label in names.values():
                score = difflib.SequenceMatcher(None, folded, fold(label)).ratio()
                if score > best[0]:
                    best = (score, name, label)
        return (best[1], best[2]) if best[0] >= 0.6 else (facets[0], None)

    def _stray_names(self, tokens: list[_Token], out: Understanding) -> None:
        """A capitalised name that is almost a known person's or project's ("Ana Peres")."""
        run: list[int] = []
        for i, t in enumerate(tokens + [_Token("", "", 0, 0, "end")]):
            if t.used is None and t.capitalised and t.word not in lx.STOPWORDS and i > 0 \
                    and t.word not in self.vocab.type_words and t.word not in self.cues:
                run.append(i)
                continue
            if run:
                text = " ".join(tokens[k].text for k in run)
                for name in [n for n, labels in self.vocab.labels.items() if labels]:
                    facet, suggestion = self._closest([name], text)
                    if suggestion and difflib.SequenceMatcher(None, fold(text), fold(suggestion)).ratio() >= 0.8:
                        out.notices.append(Notice(facet, text, suggestion))
                        for k in run:
                            tokens[k].used = "notice"
                        break
                run = []

    def _merge(self, conditions: list[Condition]) -> list[Condition]:
        """One condition per (facet, key): values of a facet OR-ed, negated ones removed."""
        out: list[Condition] = []
        by_key: dict[tuple[str, str, str], Condition] = {}
        for c in conditions:
            op = c.op
            slot = (c.facet, c.key, "neg" if op == "not_in" else "pos" if op == "in" else op)
            prior = by_key.get(slot)
            if prior is None:
                by_key[slot] = c
                out.append(c)
                continue
            if op in ("in", "not_in"):
                merged = Condition(c.facet, op, tuple(dict.fromkeys(prior.values + c.values)), c.key,
                                   f"{prior.text}, {c.text}")
                out[out.index(prior)] = merged
                by_key[slot] = merged
        final = []
        for c in out:
            if c.op == "in":
                neg = by_key.get((c.facet, c.key, "neg"))
                if neg is not None:
                    kept = tuple(v for v in c.values if v not in neg.values)
                    if kept:
                        final.append(Condition(c.facet, "in", kept, c.key, c.text))
                    continue
            final.append(c)
        return final

    def _target(self, out: Understanding, types: list[str]) -> str | None:
        """The record type the conditions, count or group are about."""
        facets = {c.facet for c in out.conditions}
        if out.group_by:
            facets.add(out.group_by)
        if not facets and not out.count:
            return None
        candidates = self.vocab.types_with(facets) if facets else list(self.vocab.types)
        if not candidates:
            return None
        named = [t for t in types if t in candidates]
        if "TASK" in named or (not named and "TASK" in candidates):
            return "TASK" if "TASK" in candidates else candidates[0]
        if named:
            return named[0]
        return candidates[0]


def _window(name: str, today: dt.date) -> tuple[dt.date, dt.date]:
    monday = today - dt.timedelta(days=today.weekday())
    if name == "today":
        return today, today
    if name == "tomorrow":
        return today + dt.timedelta(days=1), today + dt.timedelta(days=1)
    if name == "this_week":
        return monday, monday + dt.timedelta(days=6)
    if name == "next_week":
        return monday + dt.timedelta(days=7), monday + dt.timedelta(days=13)
    first = today.replace(day=1)
    nxt = (first + dt.timedelta(days=32)).replace(day=1)
    return first, nxt - dt.timedelta(days=1)
