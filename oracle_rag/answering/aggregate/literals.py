"""Literals as placeholders: what a question and its SQL asked about, taken out of the text.

Two places keep a question's SQL beyond the answer: a question -> SQL example (offered to the model
for later questions) and the audit trail (``audit_questions = false`` keeps no question, so it must
not keep the question's values through its SQL either). Both keep the SQL's shape with every string
literal as ``:text`` (``:date`` for an ISO date) and every number as ``:number``. The SQL is read
with the guard's own lexer, so a literal is exactly what the database would read as one.
"""

from __future__ import annotations

import re

from oracle_rag.answering.aggregate.lexer import COMMENT, NUMBER, STRING, LexError, tokenize

TEXT, NUM, DATE = ":text", ":number", ":date"
PLACEHOLDERS = frozenset({TEXT[1:], NUM[1:], DATE[1:]})
_ANY_WORD = re.compile(r"\w+")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
# In a question: a quoted span (bounded, no quote inside), or a run of digits with the separators of
# numbers, dates and times. Each is one character class repeated once: linear in the text.
_QUOTED = re.compile(r"[\"'`“”‘’«»][^\"'`“”‘’«»\n]{1,200}[\"'`“”‘’«»]")
_DIGITS = re.compile(r"\d[\d.,:/-]*")


def _string_placeholder(token_text: str) -> str:
    body = token_text[token_text.index("'") + 1 : -1] if "'" in token_text else token_text
    return DATE if _ISO_DATE.match(body.strip("%")) else TEXT


def mask_sql(sql: str, dialect: str) -> tuple[str, set[str]]:
    """``sql`` with every string and number literal a placeholder, and the words the strings held.

    LexError when the text is not SQL the dialect reads (such SQL never ran through the guard).
    """
    out: list[str] = []
    held: set[str] = set()
    for token in tokenize(sql, dialect):
        if token.kind == STRING:
            out.append(_string_placeholder(token.text))
            held.update(w.lower() for w in _ANY_WORD.findall(token.text[1:]))
        elif token.kind == NUMBER:
            out.append(NUM)
        elif token.kind == COMMENT:
            out.append(" ")
        else:
            out.append(token.text)
    return " ".join("".join(out).split()), held


def mask_question(question: str, held: set[str]) -> str:
    """``question`` with its quoted text, numbers and dates, and the words in ``held``, as placeholders."""
    # Placeholders go in as marks no pattern below matches (no word character), then become text.
    marks = {"\x00\x01": TEXT, "\x00\x02": NUM, "\x00\x03": DATE}
    text = _QUOTED.sub("\x00\x01", question.replace("\x00", " "))
    text = _DIGITS.sub(lambda m: "\x00\x03" if _ISO_DATE.match(m.group()) else "\x00\x02", text)
    text = _ANY_WORD.sub(lambda m: "\x00\x01" if m.group().lower() in held else m.group(), text)
    for mark, placeholder in marks.items():
        text = text.replace(mark, placeholder)
    return " ".join(text.split())


def masked_literals(sql: str | None, dialect: str) -> str | None:
    """``sql`` with its literals as placeholders; None for no SQL or text the dialect cannot read."""
    if not sql:
        return None
    try:
        return mask_sql(sql, dialect)[0]
    except LexError:
        return None
