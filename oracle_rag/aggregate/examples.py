"""Accepted aggregate answers as question -> SQL examples for text-to-SQL (issue 26).

An answer rated "up" whose guarded SQL ran is an example the model may follow for a similar
question: the most alike (shared words) are added to the SQL prompt. Only the question and the
SQL are given, never rows; the SQL the model then writes runs through the same guard and the
caller's scoped views, so an example cannot widen what a caller sees.
"""

from __future__ import annotations

import re

from ..engines import Engine
from ..engines.records import lob_text
from . import examples_sql as q

READ = 200  # the newest accepted answers looked at
GIVE = 3  # at most this many examples in a prompt
LIKENESS = 0.3  # Jaccard of the questions' words, below which an example is not given
_WORD = re.compile(r"\w{3,}")


def words(text: str) -> set[str]:
    return set(_WORD.findall(text.lower()))


def similar_examples(engine: Engine, question: str) -> list[tuple[str, str]]:
    """(question, sql) of accepted answers most like ``question``, best first."""
    want = words(question)
    if not want:
        return []
    with engine.connect() as conn:
        rows = conn.execute(engine.statement(q.ACCEPTED_SQL), {"limit": READ}).fetchall()
    scored: dict[str, tuple[float, str]] = {}
    for sql_value, question_value in rows:
        if question_value is None:
            continue
        sql, asked = lob_text(sql_value), lob_text(question_value)
        have = words(asked)
        score = len(want & have) / len(want | have) if have else 0.0
        if score >= LIKENESS and (sql not in scored or scored[sql][0] < score):
            scored[sql] = (score, asked)
    best = sorted(scored.items(), key=lambda item: -item[1][0])[:GIVE]
    return [(asked, sql) for sql, (_, asked) in best]


def examples_text(examples: list[tuple[str, str]]) -> str:
    if not examples:
        return ""
    lines = ["", "Queries accepted for similar questions (follow them where they fit; answer this question):"]
    for asked, sql in examples:
        lines += [f"Q: {' '.join(asked.split())}", f"SQL: {' '.join(sql.split())}"]
    return "\n".join(lines)
