"""The sentences of the best records that answer an open question, for the answer without a model.

A record's first lines rarely answer *why*, *who said* or *what was decided*: the root cause or the
decision sits in a comment further down. So each retrieved record is split into sentences (its body
and each comment line, ``- Author (date): text`` or ``- Author: text``, the author kept), and each
sentence is scored against the question:

* the question's words it shares, weighted by how rare they are among the sentences considered
  (accent- and case-folded, word starts compared, so *blocked* meets *blocking*, *rechazó* meets
  *rechazado*);
* its embedding's similarity to the question's (the deployment's model, when an embedder is given);
* the question's kind (``data/answer_cues.toml``: *why* wants a cause, *who* a comment's author,
  *decided* a decision, *workaround* a way around, *what is blocking* the blocker), in English and
  Spanish alike: a Spanish question is answered by English sentences and the reverse. A question of
  two kinds (*who found the root cause*) prefers a sentence of both, and *who* is narrowed to the
  question's own verb when it has one (*who found* is the comment that found it, not one that decided);
* how well its record as a whole matches the question, and the record's retrieval rank. A record's
  opening text states the problem and counts less, unless it carries the answer under its label
  ("... (45 tickets so far). Decision: roll back ...").

The best sentence of each record (and the one after it, when it continues a short comment) is what
the answer quotes, records ordered by their best sentence; when that sentence only matches the
question's words (the problem as reported), the record's best sentence of the question's kind is
quoted with it. The scores are returned so that a caller can tell strong evidence from weak.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any

import numpy as np

from oracle_rag.answering.structured.lexicon import fold

# (texts, "query" | "passage") -> L2-normalised vectors, one row per text (None: no model); the kind
# picks the prefix the model expects (e5's "query: " for the question, "passage: " for the sentences)
Embedder = Callable[[Sequence[str], str], Any]

# Weights of a sentence's score (sum of the parts, each in [0, 1]); measured on bench/qa_open.py.
W_TERMS = 0.45
W_EMBEDDING = 0.35
W_CUE = 0.15
W_RECORD = 0.2
W_RANK = 0.1
W_REPLY = 0.25  # the sentence is in a comment: a record's own text states the problem, its comments answer
W_AUTHOR = 0.2  # a "who" question: the sentence is a comment, whose author answers it
OPENING = 0.6  # a question of a kind, a record with comments: its opening text states the problem
SHORT_UNIT = 320  # characters: a comment this short is quoted whole
EMBEDDED = 12  # passages compared by embedding: the best by the other parts

# "- Jonas Berg (2026-01-28): text", "- Ana Pérez: text": a comment line, its author kept.
_COMMENT = re.compile(
    r"^-[ \t]+(?P<author>[^\s:()][^:()\n]{1,59}?)(?:[ \t]+\((?P<when>[^)\n]{1,40})\))?:[ \t]+"
    r"(?P<text>\S.*)$"
)
# "Status: TODO | Priority: HIGH", "Project: Atlas": a short header line, not prose.
_HEADER = re.compile(r"^[A-Z][\w ]{0,24}:\s*\S")
_LABEL = re.compile(r"^(?:Description|Descripción|Body|Summary|Resumen):\s+", re.IGNORECASE)
_SPLIT = re.compile(r"(?<=[.!?])[\"”’)]?\s+(?=[\"“¿¡(]?[A-ZÁÉÍÓÚÑ0-9])")
_LABELLED = re.compile(r"\w*\s?:")  # what follows a label's word: the rest of it, then a colon
_WORD = re.compile(r"\w+(?:[.\-/]\w+)*")
STEM = 5  # characters of a word compared: "blocked"/"blocking", "rechazado"/"rechazo"
MIN_WORDS = 3


@dataclass(frozen=True)
class Sentence:
    text: str
    author: str | None = None  # the comment's author, when the sentence is in a comment
    when: str | None = None  # the comment's date as written
    unit: int = 0  # which paragraph or comment of the record it is in


@dataclass(frozen=True)
class Passage:
    """What the answer quotes from one record: its best sentences, in record order, and their score."""

    record: int  # index into the records given
    sentences: tuple[Sentence, ...]
    score: float  # the best sentence's score
    terms: float  # the share of the question's words (weighted) the best sentence has


@dataclass(frozen=True)
class Cues:
    """The catalog: question kinds (their question and answer phrases) and the stop words."""

    kinds: dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]]
    stopwords: frozenset[str]

    def of(self, question: str) -> list[str]:
        """The kinds a question is of ("why", "who", ...), by its words."""
        folded = fold(question)
        return [k for k, (asks, _, _) in self.kinds.items() if any(_has(folded, p) for p in asks)]

    def answers(self, kind: str, folded_sentence: str, phrases: Sequence[str] | None = None) -> float:
        """1 when the sentence holds one of the kind's answer phrases (``phrases``: those of
        :meth:`phrases`), 2 when it is labelled with one ("Workaround: ...", "Root cause: ...",
        "Decisión: ..."), else 0."""
        found = [p for p in (self.kinds[kind][1] if phrases is None else phrases) if _has(folded_sentence, p)]
        if not found:
            return 0.0
        labelled = any(
            folded_sentence.startswith(p.rstrip("*")) and _LABELLED.match(folded_sentence, len(p.rstrip("*")))
            for p in found
        )
        return 2.0 if labelled else 1.0

    def phrases(self, kind: str, folded_question: str) -> tuple[str, ...]:
        """The answer phrases of ``kind`` for this question. A comment's kind ("who") is narrowed to the
        verb the question uses when it is one of them: "who *found* the cause" is answered by the comment
        that found it, not by the one that decided something."""
        asks, answers, comment = self.kinds[kind]
        if not comment:
            return answers
        used = tuple(p for p in answers if _has(folded_question, p))
        return used or answers

    def wants_author(self, kinds: Sequence[str]) -> bool:
        return any(self.kinds[k][2] for k in kinds)


def _has(folded: str, phrase: str) -> bool:
    return _pattern(phrase).search(folded) is not None


@lru_cache(maxsize=1024)
def _pattern(phrase: str) -> re.Pattern[str]:
    """A catalog phrase on word boundaries (", so" starts with its comma: no boundary before it)."""
    start = r"(?<!\w)" if phrase[:1].isalnum() else ""
    if phrase.endswith("*"):
        return re.compile(start + re.escape(phrase[:-1]) + r"\w*")
    return re.compile(start + re.escape(phrase) + r"(?!\w)")


@lru_cache(maxsize=1)
def cues() -> Cues:
    """The catalog shipped in ``oracle_rag/data/answer_cues.toml`` (read once)."""
    data = tomllib.loads(resources.files("oracle_rag").joinpath("data/answer_cues.toml").read_text("utf-8"))
    kinds = {
        name: (
            tuple(fold(p) for p in k["question"]),
            tuple(fold(p) for p in k["answer"]),
            bool(k.get("comment", False)),
        )
        for name, k in data["kinds"].items()
    }
    return Cues(kinds, frozenset(fold(w) for w in data["stopwords"]["words"]))


def split_record(content: str) -> tuple[str, list[Sentence]]:
    """A record's first line (its title) and its sentences: body paragraphs and comments, authors kept.

    Header lines (``Status: TODO | Priority: HIGH``) are left out; a labelled body line
    (``Description: ...``) keeps its text."""
    lines = content.strip().split("\n")
    title = lines[0].strip() if lines else ""
    out: list[Sentence] = []
    for unit, raw in enumerate(lines[1:], 1):
        line = raw.strip()
        if not line or line.endswith(":") and len(line) < 30:  # "Comments:"
            continue
        comment = _COMMENT.match(line)
        author = when = None
        if comment:
            author, when, line = comment.group("author").strip(), comment.group("when"), comment.group("text")
        else:
            labelled = _LABEL.match(line)
            if labelled:
                line = line[labelled.end() :]
            elif _HEADER.match(line) and len(line.split()) <= 12:
                continue
        pending = ""
        for piece in _SPLIT.split(line):
            piece = (pending + " " + piece).strip() if pending else piece.strip()
            pending = ""
            if piece.endswith("?"):  # a question in a comment is answered by what follows it
                pending = piece
                continue
            if len(piece.split()) >= MIN_WORDS:
                out.append(Sentence(piece, author, when, unit))
        if pending and len(pending.split()) >= MIN_WORDS:
            out.append(Sentence(pending, author, when, unit))
    return title, out


def stems(text: str, stop: frozenset[str] = frozenset()) -> set[str]:
    """The folded words of ``text`` cut to their first STEM characters, stop words left out."""
    return {w[:STEM] for w in _WORD.findall(fold(text)) if w not in stop and len(w) > 1}


def candidates(split: list[tuple[str, list[Sentence]]]) -> list[tuple[int, tuple[Sentence, ...]]]:
    """What can be quoted, per record: a short comment or paragraph whole (it is one utterance), else
    each of its sentences with the next one when the two are short enough to read together."""
    out: list[tuple[int, tuple[Sentence, ...]]] = []
    for i, (_, sentences) in enumerate(split):
        units: dict[int, list[Sentence]] = {}
        for sentence in sentences:
            units.setdefault(sentence.unit, []).append(sentence)
        for unit in units.values():
            if sum(len(s.text) for s in unit) <= SHORT_UNIT:
                out.append((i, tuple(unit)))
                continue
            for at, sentence in enumerate(unit):
                after = unit[at + 1] if at + 1 < len(unit) else None
                pair = after is not None and len(sentence.text) + len(after.text) <= SHORT_UNIT
                out.append((i, (sentence, after) if pair and after is not None else (sentence,)))
    return out


def best_passages(
    question: str, contents: Sequence[str], embed: Embedder | None = None, catalog: Cues | None = None
) -> list[Passage]:
    """One passage per record of ``contents`` (in retrieval order), best first.

    ``embed`` maps texts to L2-normalised vectors (the question's and the passages'); without it the
    score is the words, the question's kind and the record's match only."""
    catalog = catalog or cues()
    kinds = catalog.of(question)
    answer_phrases = {k: catalog.phrases(k, fold(question)) for k in kinds}
    cue_words = {w for k in kinds for p in catalog.kinds[k][0] for w in p.split()}
    wanted = stems(question, catalog.stopwords | cue_words) or stems(question, catalog.stopwords)
    split = [split_record(c) for c in contents]
    found = candidates(split)
    if not found:
        return []
    texts = [" ".join(s.text for s in sentences) for _, sentences in found]
    have = [stems(t) for t in texts]
    weight = _idf(wanted, have)
    total = sum(weight.values()) or 1.0
    record_terms = []
    for title, record_sentences in split:
        whole = stems(title) | set().union(*(stems(s.text) for s in record_sentences))
        record_terms.append(sum(w for t, w in weight.items() if t in whole) / total)
    wants_author = catalog.wants_author(kinds)
    discussed = {i for i, quote in found if quote[0].author is not None}
    parts: list[
        tuple[float, float, float, float]
    ] = []  # (score without the embedding, multiplier, terms, cue)
    for n, (i, sentences) in enumerate(found):
        terms = sum(w for t, w in weight.items() if t in have[n]) / total
        # labelled inside a passage too: "... (45 tickets so far). Decision: roll back ..."
        folded = [fold(texts[n])] + ([fold(s.text) for s in sentences] if len(sentences) > 1 else [])
        # a question of two kinds ("who found the root cause") is answered best by a sentence of both
        per_kind = [max(catalog.answers(k, f, answer_phrases[k]) for f in folded) for k in kinds]
        cue = sum(per_kind)
        reply = sentences[0].author is not None and i in discussed
        base = (
            W_TERMS * terms
            + W_CUE * cue
            + W_RECORD * record_terms[i]
            + W_RANK / (1 + i)
            + (W_REPLY if reply else 0.0)
            + (W_AUTHOR if wants_author and reply else 0.0)
        )
        # the opening states the problem, unless it carries the answer under its label ("Decision: ...")
        opening = kinds and i in discussed and sentences[0].author is None and 2.0 not in per_kind
        parts.append((base, OPENING if opening else 1.0, terms, cue))
    # the model compares only the passages the rest favours: the others cannot catch up
    shortlist = sorted(range(len(found)), key=lambda n: -parts[n][0] * parts[n][1])[:EMBEDDED]
    similarity = dict(
        zip(shortlist, _similarity(question, [texts[n] for n in shortlist], embed), strict=True)
    )
    best: dict[int, tuple[float, int]] = {}  # record -> (score, passage)
    answering: dict[int, tuple[float, int]] = {}  # record -> its best passage of the question's kind
    for n, (i, _) in enumerate(found):
        base, multiplier, terms, cue = parts[n]
        score = (base + W_EMBEDDING * similarity.get(n, 0.0)) * multiplier
        if i not in best or score > best[i][0]:
            best[i] = (score, n)
        if cue and (i not in answering or score > answering[i][0]):
            answering[i] = (score, n)
    out = []
    for i, (score, n) in best.items():
        quoted = [n]
        if parts[n][3] == 0 and i in answering:
            # the record's best match states the problem ("users at Nakatomi get expired links"); the
            # sentence of the question's kind ("Blocked: ...") is what answers: both are quoted
            quoted = sorted({n, answering[i][1]})
        sentences = tuple(dict.fromkeys(s for m in quoted for s in found[m][1]))
        out.append(Passage(i, sentences, round(score, 4), round(parts[n][2], 4)))
    return sorted(out, key=lambda p: (-p.score, p.record))


def _idf(wanted: set[str], sentence_stems: list[set[str]]) -> dict[str, float]:
    """Each question word's weight: rarer among the sentences considered weighs more (BM25's idf)."""
    n = len(sentence_stems)
    out = {}
    for t in wanted:
        df = sum(1 for have in sentence_stems if t in have)
        out[t] = math.log(1 + (n - df + 0.5) / (df + 0.5))
    return out


def _similarity(question: str, texts: list[str], embed: Embedder | None) -> list[float]:
    if embed is None or not texts:
        return [0.0] * len(texts)
    asked = embed([question], "query")
    found = None if asked is None else embed(texts, "passage")
    if found is None:
        return [0.0] * len(texts)
    vectors = np.asarray(found, dtype=np.float32)
    return [max(0.0, float(v)) for v in vectors @ np.asarray(asked, dtype=np.float32)[0]]
