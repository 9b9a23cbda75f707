"""Task ids the caller may not see never appear in answer text, streamed or not."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from oracle_rag.chat.mentions import REMOVED, redact, redact_stream

VISIBLE = {"5", "21", "300"}


def visible(ids: set[str]) -> set[str]:
    return ids & VISIBLE


def test_redact_replaces_only_invisible_ids():
    text = "See [TASK #21], [TASK #7], task #0005, Task # 9 and SPRINT #7."
    assert redact(text, visible) == f"See [TASK #21], {REMOVED}, task #0005, {REMOVED} and SPRINT #7."


def test_no_mentions_means_no_scope_query():
    calls = []
    assert redact("nothing here [SPRINT #3]", lambda ids: calls.append(ids) or set()) == "nothing here [SPRINT #3]"
    assert calls == []


def test_stream_passes_pieces_through_unless_a_mention_may_be_arriving():
    out = list(redact_stream(["The ta", "sk is [TA", "SK #", "4", "2] and TASK #5", " done. Test it"], visible))
    assert "".join(out) == f"The task is {REMOVED} and TASK #5 done. Test it"
    assert out[0] == "The "  # "ta" could start "task #": held back, the rest sent at once


@given(st.lists(st.sampled_from(["[", "TASK", " #", "7", "21", "]", " text ", "t", "ask", "#", "300", "\n", "T"]),
                max_size=40), st.integers(min_value=1, max_value=7))
@settings(max_examples=300, deadline=None)
def test_stream_equals_whole_text_redaction_for_any_split(tokens, size):
    """However the model's text is cut into pieces, the stream says what redacting the whole says."""
    text = "".join(tokens)
    pieces = [text[i:i + size] for i in range(0, len(text), size)]
    assert "".join(redact_stream(pieces, visible)) == redact(text, visible)
