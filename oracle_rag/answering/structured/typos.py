"""One typo in a question's word: "taks" -> tasks, "blokced" -> blocked, "progres" -> progress.

A word that is not known is read as a known word of five letters or more
when exactly one such word is one edit away (a letter added, removed,
changed, or two neighbours swapped). Only the words the parser knows are
candidates: record words, facet values and names, cue words, intent words.
The answer says what was read (``Understanding.read_as``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping

MIN_LENGTH = 5


def one_edit(a: str, b: str) -> bool:
    """``a`` and ``b`` differ by exactly one insertion, deletion, substitution or adjacent swap."""
    if a == b:
        return False
    la, lb = len(a), len(b)
    if abs(la - lb) > 1:
        return False
    if la == lb:
        diff = [i for i in range(la) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        return (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    if la > lb:
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i:] == b[i + 1 :]


def _keys(word: str) -> set[str]:
    return {word, *(word[:i] + word[i + 1 :] for i in range(len(word)))}


class Corrector:
    """Corrections against a fixed set of known words (built once per vocabulary).

    The words one edit away are looked up, not compared one by one: each candidate is indexed by
    itself and by each of its one-letter deletions, and two words one edit apart share such a key
    (an added, removed or changed letter, or two swapped neighbours, leave a common deletion); the
    few words found are confirmed with :func:`one_edit`. A question's unknown word costs lookups in
    proportion to its length, however many names a deployment declares (comparing it with every
    candidate cost 1.6 s for a 4,000-character question against 5,000 people).
    """

    def __init__(
        self, known: Iterable[str], candidates: Iterable[str], meaning: Mapping[str, Hashable] | None = None
    ) -> None:
        """``meaning``: what each candidate means; several candidates with one meaning are not ambiguous
        ("progres": progress or progreso, both the same value)."""
        self.meaning = dict(meaning or {})
        self.known = frozenset(known)
        self.keys: dict[str, list[str]] = {}  # a candidate, and it less one letter -> the candidates
        self.longest = 0
        for word in {w for w in candidates if len(w) >= MIN_LENGTH and w.isalpha()}:
            self.longest = max(self.longest, len(word))
            for key in _keys(word):
                self.keys.setdefault(key, []).append(word)

    def near(self, word: str) -> set[str]:
        """The candidates exactly one edit from ``word`` (:func:`one_edit`)."""
        if len(word) > self.longest + 1:  # no candidate is near, and its keys would cost its length squared
            return set()
        return {c for key in _keys(word) for c in self.keys.get(key, ()) if one_edit(word, c)}

    def correct(self, word: str, fits: Callable[[str], bool] | None = None) -> str | None:
        """The one known word ``word`` is a typo of, or None (known, too short, none or several).

        Several words of one meaning are one answer: the one that ``fits`` (forms a phrase with the
        words around it), else the first in order."""
        if word in self.known or len(word) < MIN_LENGTH - 1 or not word.isalpha():
            return None
        found = sorted(self.near(word))
        if len(found) > 1 and len({self.meaning.get(c, c) for c in found}) == 1:
            fitting = [c for c in found if fits is not None and fits(c)]
            return (fitting or found)[0]
        return found[0] if len(found) == 1 else None
