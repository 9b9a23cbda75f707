"""Feedback on answers: thumbs up/down and an optional comment.

A rating names a stored answer (its message id, ``message_id`` in every stored answer's JSON). The
caller may only rate answers of their own conversations: anything else reads as "not found", so
ids cannot be probed. Each row keeps what was understood and the guarded SQL of the answer (copied
from the message), never the rows it showed; ``oracle-rag feedback export`` turns the rows into a
question set ``bench/qa.py`` scores.

A rating "up" of an answer that ran guarded SQL also stores that question and SQL with their
literals as placeholders: the example ``answering/aggregate/examples.py`` may offer to the same caller (and,
once approved, to anyone). Ratings are limited per caller (:class:`RatingLimit`), so one caller
cannot flood the table or the examples.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from oracle_rag.answering.aggregate.examples import MAX_ID, example_of
from oracle_rag.answering.chat import feedback_sql as q
from oracle_rag.engines import Engine
from oracle_rag.engines.records import lob_text
from oracle_rag.errors import InputError, NotFoundError, RateLimitError
from oracle_rag.sources.base import iso_or_none

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
        return {
            "id": self.feedback_id,
            "message_id": self.message_id,
            "caller_id": self.caller_id,
            "rating": "up" if self.rating > 0 else "down",
            "comment": self.comment,
            "understood": self.understood,
            "guarded_sql": self.guarded_sql,
            "created_at": self.created_at,
            "question": self.question,
            "answer": self.answer,
        }


class RatingLimit:
    """At most ``per_minute`` ratings per caller in any 60 seconds of ``clock`` (a sliding window).

    Kept in the process (one per web app); the clock is injectable so tests need no wall time.
    """

    WINDOW_S = 60.0

    def __init__(self, per_minute: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.per_minute = int(per_minute)
        self.clock = clock
        self._lock = threading.Lock()
        self._seen: dict[int, deque[float]] = {}

    def take(self, caller_id: int) -> None:
        """Count one rating of ``caller_id``, or RateLimitError (nothing counted) when over the limit."""
        now = self.clock()
        with self._lock:
            seen = self._seen.setdefault(int(caller_id), deque())
            while seen and seen[0] <= now - self.WINDOW_S:
                seen.popleft()
            if len(seen) >= self.per_minute:
                retry = max(1, int(seen[0] + self.WINDOW_S - now + 0.999))
                raise RateLimitError(
                    f"too many ratings: at most {self.per_minute} a minute; try again in {retry} s",
                    retry_after=retry,
                )
            seen.append(now)
            if len(self._seen) > 10_000:  # forget callers with no rating in the window
                for key in [k for k, v in self._seen.items() if not v or v[-1] <= now - self.WINDOW_S]:
                    del self._seen[key]


class FeedbackStore:
    def __init__(self, engine: Engine, limit: RatingLimit | None = None) -> None:
        self.engine = engine
        self.limit = limit

    def record(self, message_id: Any, caller_id: int, rating: int, comment: str | None) -> None:
        """Store one rating of the caller's own answer; NotFoundError, or RateLimitError past the limit.

        An id no engine can store (past 2^63 - 1) is "not found" like any other id that is not the
        caller's answer.
        """
        if isinstance(message_id, bool) or not isinstance(message_id, int) or not 0 < message_id <= MAX_ID:
            raise NotFoundError("answer not found")
        if self.limit is not None:
            self.limit.take(caller_id)
        binds = {"message_id": message_id, "caller_id": int(caller_id)}
        # Reads, then writes: on SQLite a deferred transaction's upgrade to a writer fails at once with
        # SQLITE_BUSY when another writer (the audit thread) got there between; IMMEDIATE waits instead.
        with self.engine.begin_exclusive() as conn:
            rated = conn.execute(self.engine.statement(q.RATED_ANSWER), binds).first()
            if rated is None:
                raise NotFoundError("answer not found")
            example = None
            if rating > 0 and rated[0] is not None:
                example = example_of(
                    lob_text(rated[1]) if rated[1] is not None else None,
                    lob_text(rated[0]),
                    self.engine.sql_dialect,
                )
            done = conn.execute(
                self.engine.statement(q.INSERT_FEEDBACK),
                {
                    **binds,
                    "rating": rating,
                    "comment_text": comment,
                    "example_question": example[0] if example else None,
                    "example_sql": example[1] if example else None,
                },
            )
            if not done.rowcount:
                raise NotFoundError("answer not found")

    def list(self, *, since: str | None = None, rating: int | None = None) -> list[Feedback]:
        with self.engine.connect() as conn:
            rows = conn.execute(
                self.engine.statement(q.LIST_FEEDBACK), {"since": check_since(since), "rating": rating}
            ).fetchall()
        out = []
        for r in rows:
            understood = lob_text(r[5]) if r[5] is not None else ""
            out.append(
                Feedback(
                    int(r[0]),
                    int(r[1]),
                    int(r[2]),
                    int(r[3]),
                    lob_text(r[4]) if r[4] is not None else None,
                    json.loads(understood) if understood else None,
                    lob_text(r[6]) if r[6] is not None else None,
                    iso_or_none(r[7]),
                    lob_text(r[8]),
                    lob_text(r[9]) if r[9] is not None else None,
                )
            )
        return out
