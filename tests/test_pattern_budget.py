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
    "oracle_rag.triggers._CREATE": "reads the trigger scripts shipped in the package (triggers.py)",
}


def test_the_patterns_are_found_everywhere_they_are_written() -> None:
    names = set(PATTERNS)
    assert len(PATTERNS) > 80
    for expected in ("oracle_rag.chat.checking._ANCHOR", "oracle_rag.chat.mentions._MORE", "RecordWords.head",
                     "QueryParser._id_patterns[0]", "oracle_rag.answers.numbers.BETWEEN"):
        assert expected in names, expected
    assert any(n.startswith("oracle_rag/chat/checking.py:") for n in names), "inline patterns are found too"
    assert set(OWN_TEXT) <= names, "an exemption names a pattern that no longer exists"


@pytest.mark.parametrize("name", sorted(set(PATTERNS) - set(OWN_TEXT)))
def test_pattern_cost_grows_linearly(name: str) -> None:
    found = PATTERNS[name]
    for family in families(found.pattern):
        verdict = growth(found, family)
        assert verdict.ok, (f"{name} {found.pattern.pattern!r} ({sorted(found.uses)}): {verdict.ratio:.0f}x the "
                            f"cost at {verdict.length} characters of {verdict.what}")


@pytest.mark.parametrize(("pattern", "uses"), [
    (r"(?<![\w])tasks?(?: ?#)* ?(?:\d+(?: ?,? ?\d*)*)? ?$", "search"),  # a list of ids, each id splittable
    (r"\btask\s*(?:#\s*)?\s*(\d+)", "search"),  # two runs of spaces, split n ways
    (r"\{.*\}", "search"),  # every "{" rescans the rest
    (r"^Status: ([^|\n]+?)\s*(?:\||$)", "search"),  # a lazy group before \s*
    (r"(\d+)\s*(ms|s)", "search"),  # a search from every digit of a run
])
def test_the_budget_finds_superlinear_patterns(pattern: str, uses: str) -> None:
    """The test above can fail: patterns of the shapes it once found are caught."""
    found = Found(re.compile(pattern, re.MULTILINE), frozenset({uses}))
    assert any(not growth(found, family).ok for family in families(found.pattern)), pattern
