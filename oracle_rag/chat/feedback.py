"""Feedback on answers: thumbs up/down and an optional comment (issue 26).

A rating names a stored answer (its message id, ``message_id`` in every stored answer's JSON). The
caller may only rate answers of their own conversations: anything else reads as "not found", so
ids cannot be probed. Each row keeps what was understood and the guarded SQL of the answer (copied
from the message), never the rows it showed; ``oracle-rag feedback export`` turns the rows into a
question set ``bench/qa.py`` scores.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ..engines import Engine
from ..engines.records import lob_text
from ..errors import InputError, NotFoundError
from ..sources.base import iso_or_none
from . import feedback_sql as q

COMMENT_CHARS = 2000
RATINGS = {"up": 1, "down": -1}
_SINCE = re.compile(r"^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}:\d{2})?$")


def check_rating(value: Any) -> int:
    if not isinstance(value, str) or value not in RATINGS:
        raise InputError('rating must be "up" or "down"')
    return RATINGS[value]


def check_comment(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InputError("comment must be a string")
    text = value.strip()
    if len(text) > COMMENT_CHARS:
        raise InputError(f"comment is longer than {COMMENT_CHARS} characters")
    return text or None


def check_since(value: str | None) -> str | None:
    """An ISO date or date-time (UTC) as the statements compare it, or InputError."""
    if value is None:
        return None
    if not _SINCE.match(value):
        raise InputError("since must be YYYY-MM-DD or YYYY-MM-DDTHH:MM:SS")
    return value if "T" in value else value + "T00:00:00"


@dataclass(frozen=True)
class Feedback:
    feedback_id: int
    message_id: int
    caller_id: int
    rating: int
    comment: str | None
    understood: dict[str, Any] | None
    guarded_sql: str | None
    created_at: str | None
    answer: str
    question: str | None

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.feedback_id, "message_id": self.message_id, "caller_id": self.caller_id,
                "rating": "up" if self.rating > 0 else "down", "comment": self.comment,
                "understood": self.understood, "guarded_sql": self.guarded_sql, "created_at": self.created_at,
                "question": self.question, "answer": self.answer}


class FeedbackStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def record(self, message_id: Any, caller_id: int, rating: int, comment: str | None) -> None:
        """Store one rating of the caller's own answer, or NotFoundError."""
        if isinstance(message_id, bool) or not isinstance(message_id, int) or message_id <= 0:
            raise NotFoundError("answer not found")
        with self.engine.begin() as conn:
            done = conn.execute(self.engine.statement(q.INSERT_FEEDBACK),
                                {"message_id": message_id, "caller_id": int(caller_id), "rating": rating,
                                 "comment_text": comment})
            if not done.rowcount:
                raise NotFoundError("answer not found")

    def list(self, *, since: str | None = None, rating: int | None = None) -> list[Feedback]:
        with self.engine.connect() as conn:
            rows = conn.execute(self.engine.statement(q.LIST_FEEDBACK),
                                {"since": check_since(since), "rating": rating}).fetchall()
        out = []
        for r in rows:
            understood = lob_text(r[5]) if r[5] is not None else ""
            out.append(Feedback(int(r[0]), int(r[1]), int(r[2]), int(r[3]),
                                lob_text(r[4]) if r[4] is not None else None,
                                json.loads(understood) if understood else None,
                                lob_text(r[6]) if r[6] is not None else None, iso_or_none(r[7]),
                                lob_text(r[8]), lob_text(r[9]) if r[9] is not None else None))
        return out
