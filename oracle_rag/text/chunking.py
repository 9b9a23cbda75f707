"""Split a long record into windows of the embedding model's own wordpieces.

The model reads at most 256 wordpieces (254 of text plus [CLS] and [SEP]);
before chunking, the rest of a long record was invisible to semantic search.
A record whose text has more than ``chunk_window`` wordpieces becomes
several chunks, each ``chunk_window`` wordpieces long at most, consecutive
ones sharing ``chunk_overlap`` wordpieces, so a sentence cut at one window's
end is whole in the next; the last window ends at the text's end and is as
full as the others (it overlaps its predecessor more rather than being a
short tail). Shorter records stay one chunk whose text is the
record's text, exactly as before.

Windows end on whitespace: the text is cut into whitespace-separated words
(with their character spans), each word is counted in wordpieces, and a
window is the longest run of words that fits. Counting word by word is exact
because BERT's basic tokeniser splits on whitespace before anything else. A
window's text is the slice of the original text from its first word to its
last, so its characters are the record's own.

The count uses the model's vocabulary (``data/wordpiece-vocab.txt``) and
the BERT uncased rules (clean, split CJK ideographs, lower-case, strip
accents, split punctuation, greedy longest-match-first WordPiece with a 100
character limit), in Python, so the split is the same whichever engine
embeds the chunks (Oracle does not run the ONNX model on the application
host). It matches the ONNX tokeniser on the reference texts
(``tests/test_chunking.py``); where the op's normalisation differs (some
non-Latin-1 scripts) a count can be off by a few pieces, which moves a
window boundary, never loses text (the overlap and the next window cover it).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from oracle_rag.errors import InputError

VOCAB_PATH = Path(__file__).resolve().parent.parent / "data" / "wordpiece-vocab.txt"
MAX_WINDOW = 254  # the model's 256 minus [CLS] and [SEP]
_WORD = re.compile(r"\S+")
_MAX_CHARS_PER_WORD = 100


@lru_cache(maxsize=1)
def vocabulary() -> frozenset[str]:
    return frozenset(VOCAB_PATH.read_text(encoding="utf-8").splitlines())


def _is_punctuation(ch: str) -> bool:
    cp = ord(ch)
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp: int) -> bool:
    return (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x2A6DF
        or 0x2A700 <= cp <= 0x2B73F
        or 0x2B740 <= cp <= 0x2B81F
        or 0x2B820 <= cp <= 0x2CEAF
        or 0xF900 <= cp <= 0xFAFF
        or 0x2F800 <= cp <= 0x2FA1F
    )


def _basic_tokens(word: str) -> list[str]:
    """BERT's basic tokeniser on one whitespace-free word: pieces before WordPiece."""
    cleaned = []
    for ch in word:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or (unicodedata.category(ch) in ("Cc", "Cf") and ch not in "\t\n\r"):
            continue
        cleaned.append(f" {ch} " if _is_cjk(cp) else ch)
    out: list[str] = []
    for part in "".join(cleaned).split():
        part = unicodedata.normalize("NFD", part.lower())
        part = "".join(ch for ch in part if unicodedata.category(ch) != "Mn")
        current = ""
        for ch in part:
            if _is_punctuation(ch):
                if current:
                    out.append(current)
                    current = ""
                out.append(ch)
            else:
                current += ch
        if current:
            out.append(current)
    return out


def _wordpieces(token: str, vocab: frozenset[str]) -> int:
    if len(token) > _MAX_CHARS_PER_WORD:
        return 1  # [UNK]
    count, start = 0, 0
    while start < len(token):
        end = len(token)
        while end > start:
            piece = token[start:end] if start == 0 else "##" + token[start:end]
            if piece in vocab:
                break
            end -= 1
        if end == start:
            return 1  # no piece matches: the whole token is [UNK]
        count += 1
        start = end
    return count


@lru_cache(maxsize=200_000)
def word_pieces(word: str) -> int:
    """Wordpieces of one whitespace-free word."""
    vocab = vocabulary()
    return sum(_wordpieces(t, vocab) for t in _basic_tokens(word))


def count_pieces(text: str) -> int:
    return sum(word_pieces(m.group(0)) for m in _WORD.finditer(text))


@dataclass(frozen=True)
class ChunkPlan:
    """How records are cut: ``window`` wordpieces per chunk, ``overlap`` shared (settings)."""

    window: int = MAX_WINDOW
    overlap: int = 32

    def __post_init__(self) -> None:
        if not 1 <= self.window <= MAX_WINDOW or not 0 <= self.overlap * 2 <= self.window:
            raise InputError(
                f"chunking needs 1 <= window <= {MAX_WINDOW} and 0 <= overlap <= window / 2, "
                f"got window={self.window}, overlap={self.overlap}"
            )

    @property
    def tag(self) -> str:
        """Part of a multi-chunk record's hash: other settings, other chunks, so re-embed."""
        return f"window={self.window};overlap={self.overlap}"

    def split(self, text: str) -> list[str]:
        """The record's chunk texts: ``[text]`` when it fits one window."""
        words = [(m.start(), m.end(), word_pieces(m.group(0))) for m in _WORD.finditer(text)]
        if sum(w[2] for w in words) <= self.window:
            return [text]
        chunks: list[str] = []
        start = 0
        while True:
            end, used = start, 0
            while end < len(words) and (used + words[end][2] <= self.window or end == start):
                used += words[end][2]
                end += 1
            if end >= len(words):
                # The last window ends at the text's end and is as full as the others: it starts
                # earlier (sharing more with the previous one) rather than being a short tail,
                # whose vector would stand for a few words out of context.
                while start > 0 and used + words[start - 1][2] <= self.window:
                    start -= 1
                    used += words[start][2]
                chunks.append(text[words[start][0] : words[-1][1]])
                return chunks
            chunks.append(text[words[start][0] : words[end - 1][1]])
            # the next window starts so that it repeats about `overlap` pieces of this one
            back, shared = end, 0
            while back - 1 > start and shared + words[back - 1][2] <= self.overlap:
                back -= 1
                shared += words[back][2]
            start = back


def join_chunks(parts: Sequence[str], plan: ChunkPlan) -> str:
    """A record's text again from the chunk texts ``plan.split`` made, for re-analysing it.

    Each chunk is a slice of the text from a word start to a word end. The
    split decides where the next chunk starts from the current chunk alone
    (the last ``overlap`` wordpieces of it), so that overlap is recomputed
    here; the last chunk starts earlier (it is as full as the others), so
    its start is the word-aligned overlap for which splitting the joined
    text gives the same chunks back. Only whitespace around the record and
    between chunks that share nothing is lost, which no analysis sees. A
    record chunked with another plan joins on the longest overlap.
    """
    if not parts:
        return ""
    text, start = parts[0], 0
    for n, part in enumerate(parts[1:], 1):
        words = list(_WORD.finditer(text, start))
        back, shared = len(words), 0
        while back - 1 > 0 and shared + word_pieces(words[back - 1].group(0)) <= plan.overlap:
            back -= 1
            shared += word_pieces(words[back].group(0))
        if n < len(parts) - 1:
            nxt = words[back].start() if back < len(words) else None
            if nxt is not None and part.startswith(text[nxt:]):
                text, start = text[:nxt] + part, nxt
                continue
            if nxt is None:
                text, start = text + " " + part, len(text) + 1
                continue
        candidates = [m.start() for m in words[1:] if part.startswith(text[m.start() :])]
        whole = [text[:c] + part for c in candidates] + [text + " " + part]
        if n == len(parts) - 1:
            fits = [t for t in whole if plan.split(t) == list(parts)]
            text = (fits or whole)[0]
        else:
            text = whole[0]
            start = candidates[0] if candidates else len(text) - len(part)
    return text


def plan_of(settings: object) -> ChunkPlan:
    """The chunk plan configured in ``settings`` (``chunk_window``, ``chunk_overlap``)."""
    return ChunkPlan(int(getattr(settings, "chunk_window", 254)), int(getattr(settings, "chunk_overlap", 32)))
