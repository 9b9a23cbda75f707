"""Task ids the caller may not see never appear in answer text, streamed or not."""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from oracle_rag.answering.chat.mentions import (
    REMOVED,
    RecordWords,
    _Arriving,
    find_mentions,
    normalise,
    redact,
    redact_stream,
)

VISIBLE = {("TASK", "5"), ("TASK", "21"), ("TASK", "300")}
# The words the reference app's task declares (the product builds these from the declarations).
WORDS = RecordWords.of({"task": ["TASK"], "tasks": ["TASK"]}, ["TASK"])


def visible(keys: set[tuple[str, str]]) -> set[tuple[str, str]]:
    return keys & VISIBLE


def test_redact_replaces_only_invisible_ids():
    text = "See [TASK #21], [TASK #7], task #0005, Task # 9 and SPRINT #7."
    assert redact(text, visible, WORDS) == f"See [TASK #21], {REMOVED}, task #0005, {REMOVED} and SPRINT #7."


def test_no_mentions_means_no_scope_query():
    calls = []
    assert (
        redact("nothing here [SPRINT #3]", lambda ids: calls.append(ids) or set(), WORDS)
        == "nothing here [SPRINT #3]"
    )
    assert calls == []


def test_stream_passes_pieces_through_unless_a_mention_may_be_arriving():
    out = list(
        redact_stream(
            ["The ta", "sk is [TA", "SK #", "4", "2] and TASK #5", " done. Test it"], visible, WORDS
        )
    )
    assert "".join(out) == f"The task is {REMOVED} and TASK #5 done. Test it"
    assert out[0] == "The "  # "ta" could start "task #": held back, the rest sent at once


@given(
    st.lists(
        st.sampled_from(["[", "TASK", " #", "7", "21", "]", " text ", "t", "ask", "#", "300", "\n", "T"]),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=7),
)
@settings(max_examples=300, deadline=None)
def test_stream_equals_whole_text_redaction_for_any_split(tokens, size):
    """However the model's text is cut into pieces, the stream says what redacting the whole says."""
    text = "".join(tokens)
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    assert "".join(redact_stream(pieces, visible, WORDS)) == redact(text, visible, WORDS)


HIDDEN = [
    "TASK ＃7",
    "ＴＡＳＫ #7",
    "TASK #７",
    "_TASK #7_",
    "__TASK #7__",
    "**TASK #7**",
    "**TASK** #7",
    "*TASK* *#7*",
    "~~TASK #7~~",
    "`TASK #7`",
    "TASK #0000000000000000000000000007",
    "TASK #007",
    "TASK" + " " * 500 + "#7",
    "TASK\n\n\t #7",
    "TASK\u00a0#7",
    "TA\u200bSK #7",
    "TASK\u00ad #7",
    "task#7",
    "Task no. 7",
    "task number 7",
    "TASK-7",
    "TASK: 7",
    "tasks 7",
    "tasks #21, #7",
    "TASKS #21 and #7",
    "[ TASK #7 ]",
    "ⓉⒶⓈⓀ #7",
    # links to the record: the page's and the API's
    "/chunk/task/7",
    "/chunk/TASK/7",
    "/api/chunks/task/7",
    "/api/chunks/TASK/0007",
    "https://rag.example/chunk/TASK/7",
    "[the task](/chunk/TASK/7)",
    '<a href="/api/chunks/TASK/7">',
    "/chunk/task/7#comment-2",
]


def test_every_spelling_of_an_invisible_mention_is_removed():
    for text in HIDDEN:
        out = redact(f"See {text} now.", visible, WORDS)
        assert REMOVED in out, text
        rest = out.replace("#21", "")
        assert "7" not in rest and "７" not in rest, (text, out)


def test_visible_mentions_and_ordinary_words_are_kept():
    kept = (
        "TASK #21, task #0005, multitask 7, SPRINT #7, 7TASK #7, TASK #21 and 2 others, the task is done, "
        "/chunk/TASK/21, /api/chunks/task/5, /chunk/SPRINT/7, a task/subtask split"
    )
    assert redact(kept, visible, WORDS) == kept


def test_an_id_longer_than_any_real_id_is_removed_without_a_query():
    asked = []
    out = redact("TASK #1234567890123456789012", lambda ids: asked.append(ids) or ids, WORDS)
    assert out == REMOVED and asked == []


@given(
    st.lists(
        st.sampled_from(
            [
                "TASK",
                "ＴＡＳＫ",
                " #",
                "＃",
                "7",
                "0",
                "21",
                "_",
                "**",
                " ",
                " " * 60,
                "\u200b",
                "[",
                "]",
                ", #",
                " and ",
                "t",
                "text",
                "/chunk/",
                "/api/chunks/",
                "task/",
                "/",
            ]
        ),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=9),
)
@settings(max_examples=400, deadline=None)
def test_stream_equals_whole_text_redaction_for_normalised_spellings(tokens, size):
    text = "".join(tokens)
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    streamed = "".join(redact_stream(pieces, visible, WORDS))
    assert streamed == redact(text, visible, WORDS)


# Another deployment's declarations: a SQL source "tickets" (nouns ticket/tickets, Spanish
# "incidencia"), a "purchase order" phrase, and one word ("item") that two types declare.
OTHER = RecordWords.of(
    {
        "ticket": ["TICKETS"],
        "tickets": ["TICKETS"],
        "incidencia": ["TICKETS"],
        "purchase order": ["ORDERS"],
        "item": ["TICKETS", "ORDERS"],
    },
    ["TICKETS", "ORDERS"],
    {"ORDERS": "PO-"},
)
OTHER_VISIBLE = {("TICKETS", "1042"), ("ORDERS", "PO-7")}


def other_visible(keys: set[tuple[str, str]]) -> set[tuple[str, str]]:
    return keys & OTHER_VISIBLE


def test_the_words_come_from_the_declarations_not_from_this_module():
    text = (
        "TICKETS #1042, ticket 1043, Incidéncia nº 1043, /chunk/tickets/1043, purchase   order #7, "
        "Purchase Order #8, TASK #1043"
    )
    out = redact(text, other_visible, OTHER)
    assert out == (
        f"TICKETS #1042, {REMOVED}, {REMOVED}, /chunk/{REMOVED}, purchase   order #7, {REMOVED}, TASK #1043"
    )  # TASK is no word of this deployment: not a record here


def test_a_word_naming_two_types_keeps_a_mention_visible_under_either():
    asked: list[set[tuple[str, str]]] = []

    def spy(keys: set[tuple[str, str]]) -> set[tuple[str, str]]:
        asked.append(set(keys))
        return other_visible(keys)

    assert redact("item 7 and item 1042, item 9", spy, OTHER) == f"item 7 and item 1042, {REMOVED}"
    assert asked == [
        {
            ("TICKETS", "7"),
            ("ORDERS", "PO-7"),
            ("TICKETS", "1042"),
            ("ORDERS", "PO-1042"),
            ("TICKETS", "9"),
            ("ORDERS", "PO-9"),
        }
    ]


def test_mentions_name_their_word_and_id():
    assert [m[2:] for m in find_mentions("see ticket #0042 and incidencias? no: INCIDENCIA 5", OTHER)] == [
        ("ticket", "42"),
        ("incidencia", "5"),
    ]


@given(
    st.lists(
        st.sampled_from(
            [
                "TICKET",
                "ticket",
                "s",
                " #",
                "1042",
                "43",
                "purchase",
                " ",
                "order",
                "Inci",
                "déncia",
                "[",
                "]",
                "/chunk/",
                "item",
                " and ",
                "#7",
                "text",
            ]
        ),
        max_size=40,
    ),
    st.integers(min_value=1, max_value=9),
)
@settings(max_examples=300, deadline=None)
def test_stream_equals_whole_text_redaction_for_declared_words(tokens, size):
    text = "".join(tokens)
    pieces = [text[i : i + size] for i in range(0, len(text), size)]
    assert "".join(redact_stream(pieces, other_visible, OTHER)) == redact(text, other_visible, OTHER)


def test_no_declared_words_means_nothing_is_a_mention():
    none = RecordWords({})
    assert redact("TASK #7 and ticket 9", lambda keys: set(), none) == "TASK #7 and ticket 9"
    assert "".join(redact_stream(["TASK #", "7"], lambda keys: set(), none)) == "TASK #7"


def _cpu(call) -> float:
    """The least CPU of three runs of ``call`` (process time: what other processes do is not counted)."""
    costs = []
    for _ in range(3):
        started = time.process_time()
        call()
        costs.append(time.process_time() - started)
    return min(costs)


def test_a_list_of_ids_is_redacted_in_time_linear_in_its_length():
    """ "Tasks 12, 15, 18, ... are blocked." once cost twelve times more per id listed (streamed or not).

    Machine-independent budget: the same text with words in place of ids, measured here, times a
    generous factor; an exponential or quadratic scan exceeds it by orders of magnitude at 3,000 ids.
    """
    ids = [7, *range(15, 15 + 3 * 29, 3)]
    text = f"Tasks {', '.join(map(str, ids))} are blocked."
    assert redact(text, visible, WORDS) == f"{REMOVED}, {', '.join(map(str, ids[1:]))} are blocked."
    for size in (1, 3, 7):
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        assert "".join(redact_stream(pieces, visible, WORDS)) == redact(text, visible, WORDS)
    many = "Tasks " + ", ".join(str(n) for n in range(10_000, 13_000))
    words = "Notes " + ", ".join(f"w{n}x" for n in range(10_000, 13_000))[: len(many) - 6]

    def run(t: str, size: int) -> None:
        "".join(redact_stream([t[i : i + size] for i in range(0, len(t), size)], visible, WORDS))

    for long, plain in ((many, words), (many + " x", words + " x")):
        for size in (len(long), 4):
            assert _cpu(lambda: run(long, size)) < 10 * _cpu(lambda: run(plain, size)) + 0.01  # noqa: B023


def test_a_bracket_after_a_word_is_held_with_the_mention_inside_it():
    """ "TASK[TASK7]" streamed once sent "TASK[" and then kept "TASK7]": the bracket, taken into the
    mention by whole-text redaction, put the mention before the sent text, where it was not looked for."""
    text = "TASK[TASK7] and x[ TASK #9 ]"
    assert redact(text, visible, WORDS) == f"TASK{REMOVED} and x{REMOVED}"
    for size in range(1, 8):
        pieces = [text[i : i + size] for i in range(0, len(text), size)]
        assert "".join(redact_stream(pieces, visible, WORDS)) == redact(text, visible, WORDS), size
    assert redact("[TASK #7]", visible, WORDS, context="TASK") == REMOVED


def test_a_run_of_separators_is_read_one_way():
    """ "no" is one separator, not two ways to read one: a run of them costs what its length costs."""
    for n in (20, 2000):
        text = "task " + "no" * n + "x #7"
        assert redact(text, visible, WORDS) == text
        assert "".join(redact_stream([text], visible, WORDS)) == text
    assert (
        _cpu(lambda: redact("task " + "no" * 4000 + "x", visible, WORDS))
        < 10 * _cpu(lambda: redact("task " + "on" * 4000 + "x", visible, WORDS)) + 0.01
    )


# The grammar of a mention still arriving, written as a pattern (exponential on a long list: used here
# on short texts only, as the statement the linear scan must agree with). A "[" starts one whatever
# precedes it: whole-text redaction takes the bracket around a mention with it.
_SEP_PART = r"(?:#|n|no|no\.|n[º°o]\.?|nu|num|numb|numbe|number|num\.|nr|nr\.|i|id|:|-|–|—|/)"
_CONNECTOR_PART = r"(?:,|;|/|&|\+|a|an|and|o|or|y|e|et|u|un|und)"


def _held_by_grammar(text: str, words: RecordWords) -> int:
    ordered = sorted(words.folded, key=lambda w: (-len(w), w))
    full = "(?:" + "|".join(re.escape(w) for w in ordered) + ")"
    cut = sorted(
        {w[:i] for w in ordered for i in range(1, len(w))} - set(ordered), key=lambda w: (-len(w), w)
    )
    partial = re.compile(
        r"(?:\[ ?|(?<![\w]))(?:"
        + "".join(re.escape(w) + "|" for w in cut)
        + full
        + r"(?: ?"
        + _SEP_PART
        + r")* ?(?:\d+(?: ?"
        + _CONNECTOR_PART
        + r"?(?: ?"
        + _SEP_PART
        + r")* ?\d*)*)?)? ?$"
    )
    norm, index = normalise(text)
    for start in range(len(norm)):
        if (norm[start] == "[" or norm[start] in words.beginnings) and partial.match(norm, start):
            return index[start]
    return len(text)


WITH_SEPARATOR_WORDS = RecordWords.of(
    {"ticket": ["T"], "purchase order": ["O"], "item": ["T"], "no": ["X"], "id": ["X"], "and": ["X"]},
    ["T", "O"],
)


@given(
    st.lists(
        st.sampled_from(
            [
                "task",
                "tasks",
                "ta",
                "t",
                "[",
                "]",
                " ",
                "  ",
                "#",
                "no",
                "n",
                "nº",
                ".",
                "number",
                "num",
                "1",
                "23",
                "0",
                ",",
                "and",
                "a",
                "o",
                "or",
                "y",
                "x",
                "_",
                "**",
                "ＴＡＳＫ",
                "\u200b",
                "id",
                "i",
                ":",
                "-",
                "/",
                "purchase",
                " order",
                "item",
                "ticket",
                "s",
                "und",
                "e",
                "et",
                "&",
                "+",
                ";",
                "nr",
                "—",
                "№",
                "ﬁ",
            ]
        ),
        max_size=8,
    ),
    st.sampled_from([WORDS, OTHER, WITH_SEPARATOR_WORDS]),
    st.integers(min_value=1, max_value=5),
)
@settings(max_examples=600, deadline=None)
def test_what_is_held_back_is_what_the_grammar_says_may_still_be_a_mention(tokens, words, size):
    text = "".join(tokens)
    arriving = _Arriving(words)
    for i in range(0, len(text), size):
        arriving.feed(text[i : i + size])
    assert arriving.earliest() == _held_by_grammar(text, words)
