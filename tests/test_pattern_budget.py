"""Every regular expression of the package costs time linear in its input, on inputs built to hurt it.

Python's ``re`` backtracks: a pattern that can read one run of characters in
several ways (``\\d+(?: ?\\d*)*``, ``\\s*\\s*``, a lazy group before ``\\s*``)
costs polynomial or exponential time on a long run followed by a character
that makes the match fail, and a search retries every start. Questions,
model replies, source rows and configuration values are all text someone
else wrote, so every pattern is run here (tests/pattern_budget_helpers.py
finds them and builds the inputs: long runs of what each repeat accepts, cut
short or followed by a near-miss) at growing lengths up to 8,192 characters.

The budget does not depend on the machine's speed: costs are compared with
each other in this process. Four times the length may cost at most ten times
as much (a quadratic pattern costs sixteen), a step of 1.5-2x at most five
times (an exponential one explodes there first), unless the cost is within
one linear pass of the regex engine over the same text (timer noise on tiny
inputs). A finding is measured again, best of five, before it fails.
"""

from __future__ import annotations

import re

import pytest
from pattern_budget_helpers import Found, all_patterns, families, growth

PATTERNS = all_patterns()

# Patterns that only read the package's own files, never text from a caller, a model, a source or the
# configuration (a search from every line start is quadratic in blank lines, which those files lack).
OWN_TEXT = {
    "oracle_rag.indexing.triggers._CREATE": "reads the trigger scripts shipped in the package (indexing/triggers.py)",
}


def test_the_patterns_are_found_everywhere_they_are_written() -> None:
    names = set(PATTERNS)
    assert len(PATTERNS) > 80
    for expected in (
        "oracle_rag.answering.chat.checking._ANCHOR",
        "oracle_rag.answering.chat.mentions._MORE",
        "RecordWords.head",
        "QueryParser._id_patterns[0]",
        "oracle_rag.answering.structured.numbers.BETWEEN",
    ):
        assert expected in names, expected
    assert any(n.startswith("oracle_rag/answering/chat/checking.py:") for n in names), (
        "inline patterns are found too"
    )
    assert set(OWN_TEXT) <= names, "an exemption names a pattern that no longer exists"


@pytest.mark.parametrize("name", sorted(set(PATTERNS) - set(OWN_TEXT)))
def test_pattern_cost_grows_linearly(name: str) -> None:
    found = PATTERNS[name]
    for family in families(found.pattern):
        verdict = growth(found, family)
        assert verdict.ok, (
            f"{name} {found.pattern.pattern!r} ({sorted(found.uses)}): {verdict.ratio:.0f}x the "
            f"cost at {verdict.length} characters of {verdict.what}"
        )


@pytest.mark.parametrize(
    ("pattern", "uses"),
    [
        (
            r"(?<![\w])tasks?(?: ?#)* ?(?:\d+(?: ?,? ?\d*)*)? ?$",
            "search",
        ),  # a list of ids, each id splittable
        (r"\btask\s*(?:#\s*)?\s*(\d+)", "search"),  # two runs of spaces, split n ways
        (r"\{.*\}", "search"),  # every "{" rescans the rest
        (r"^Status: ([^|\n]+?)\s*(?:\||$)", "search"),  # a lazy group before \s*
        (r"(\d+)\s*(ms|s)", "search"),  # a search from every digit of a run
    ],
)
def test_the_budget_finds_superlinear_patterns(pattern: str, uses: str) -> None:
    """The test above can fail: patterns of the shapes it once found are caught."""
    found = Found(re.compile(pattern, re.MULTILINE), frozenset({uses}))
    assert any(not growth(found, family).ok for family in families(found.pattern)), pattern


def test_a_typo_is_looked_up_not_compared_with_every_known_word() -> None:
    """An unknown word of a question is corrected in time that does not grow with the vocabulary
    (a deployment's people are candidates: 5,000 names once made a 4,000-character question of
    gibberish cost 1.6 s). Budget: 100 times the candidates may cost at most 5 times as much,
    measured here; the answers equal a comparison with every candidate."""
    import random
    import time

    from oracle_rag.answering.structured.typos import Corrector, one_edit

    rng = random.Random(3)

    def word() -> str:
        return "".join(rng.choice("aeioulmnrstdkbg") for _ in range(rng.randint(5, 9)))

    many = {word() for _ in range(20_000)}
    few = set(list(many)[:200])
    asked = [word() for _ in range(2_000)] + [w[:2] + w[3:] for w in list(few)[:100]]
    small, large = Corrector(few, few), Corrector(many, many)
    for w in asked[:300] + asked[-100:]:
        assert small.near(w) == {c for c in few if one_edit(w, c)}, w

    def cost(corrector: Corrector) -> float:
        best = float("inf")
        for _ in range(3):
            started = time.process_time()
            for w in asked:
                corrector.correct(w)
            best = min(best, time.process_time() - started)
        return best

    assert cost(large) < 5 * cost(small) + 0.01
    long = (
        "no" * 50_000
    )  # one word of a 100,000-character question: longer than any candidate, looked up at once
    started = time.process_time()
    assert large.correct(long) is None
    assert time.process_time() - started < cost(large) + 0.01
