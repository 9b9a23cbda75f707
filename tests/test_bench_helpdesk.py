"""The help desk that bench/qa_open.py measures is well-formed: every ticket, comment and article parses
into the declared tables, names are people of people.json, and every question's facts are in the
records it says answer it (a question the data cannot answer would measure nothing)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

import helpdesk  # noqa: E402
import qa_open  # noqa: E402


def test_the_corpus_has_the_shape_the_bench_describes() -> None:
    shape = helpdesk.shape()
    assert shape["tickets"] >= 100 and shape["articles"] >= 25
    assert 0.25 <= shape["tickets_es"] / shape["tickets"] <= 0.4
    assert shape["tickets_with_comments"] >= 0.9 * shape["tickets"]
    rows = helpdesk.rows()
    assert len({r["ticket_id"] for r in rows["ticket"]}) == len(rows["ticket"])
    assert {r["status"] for r in rows["ticket"]} == {"NEW", "OPEN", "PENDING", "ON_HOLD", "SOLVED", "CLOSED"}


def test_every_question_is_answerable_from_its_records_or_marked_as_not() -> None:
    import json

    questions = json.loads(qa_open.QUESTIONS.read_text(encoding="utf-8"))["questions"]
    qa_open.check_questions(questions)  # raises SystemExit naming the question otherwise
    assert len(questions) >= 60 and sum(q["kind"] == "none" for q in questions) >= 8
    assert 0.3 <= sum(q["held_out"] for q in questions) / len(questions) <= 0.35
    broken = [dict(questions[0], facts=["a fact no record holds"])]
    with pytest.raises(SystemExit, match="is in none of"):
        qa_open.check_questions(broken)


def test_a_malformed_entry_is_refused_with_its_line() -> None:
    with pytest.raises(ValueError, match="line 3"):
        helpdesk.parse("=== ticket 1\nsubject: x\nno colon here\n\nbody")
    entries = helpdesk.parse(
        "=== ticket 7\nsubject: S\nlang: en\n\nFirst paragraph.\n\n"
        "--- Ana Pérez, 2026-01-02\nA comment\non two lines.\n"
    )
    assert entries[0].text == "First paragraph."
    assert entries[0].comments == [("Ana Pérez", "2026-01-02", "A comment on two lines.")]
