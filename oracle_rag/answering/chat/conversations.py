"""Conversations and their messages, stored in the database (migration V3).

Every read takes the caller's employee id and checks ownership in SQL: a
conversation of someone else reads exactly like one that does not exist
(:class:`NotFoundError`, a 404 on the web), so ids cannot be probed.
Writes run in ``begin_exclusive`` (SQLite: ``BEGIN IMMEDIATE``) so that two
threads appending at once queue for the write lock instead of failing on a
lock upgrade.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from oracle_rag.answering.chat import chat_sql as q
from oracle_rag.answering.chat.citations import Citation
from oracle_rag.answering.chat.prompt import Turn
from oracle_rag.engines import Engine
from oracle_rag.engines.records import lob_text
from oracle_rag.errors import NotFoundError
from oracle_rag.sources.base import iso_or_none

TITLE_CHARS = 80
MAX_LIST = 100
HISTORY_MESSAGES = 20  # read at most this many recent messages; the token budget trims further
_ID = re.compile(r"^[0-9a-f]{32}$")


def _text(value: Any) -> str:
    return lob_text(value)


def new_conversation_id() -> str:
    return uuid.uuid4().hex


def valid_conversation_id(value: Any) -> bool:
    return isinstance(value, str) and bool(_ID.match(value))


def title_for(question: str) -> str:
    flat = " ".join(question.split())
    return flat if len(flat) <= TITLE_CHARS else flat[: TITLE_CHARS - 1].rstrip() + "\u2026"


@dataclass(frozen=True)
class ConversationSummary:
    conversation_id: str
    title: str
    created_at: str | None
    updated_at: str | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.conversation_id,
            "title": self.title,
            "created_at": self.created_at,
            "updated_at": self.updated_at,
        }


@dataclass(frozen=True)
class Message:
    role: str
    content: str
    citations: list[dict[str, str]] = field(default_factory=list)
    created_at: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "content": self.content,
            "citations": self.citations,
            "created_at": self.created_at,
        }


class ConversationStore:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, conn: sa.Connection, conversation_id: Any, employee_id: int) -> ConversationSummary:
        """The caller's conversation, or NotFoundError (missing, malformed or someone else's)."""
        if not valid_conversation_id(conversation_id):
            raise NotFoundError("conversation not found")
        row = conn.execute(
            self.engine.statement(q.GET_CONVERSATION),
            {"conversation_id": conversation_id, "employee_id": int(employee_id)},
        ).first()
        if row is None:
            raise NotFoundError("conversation not found")
        return ConversationSummary(str(row[0]), str(row[2]), iso_or_none(row[3]), iso_or_none(row[4]))

    def require(self, conversation_id: Any, employee_id: int) -> ConversationSummary:
        with self.engine.connect() as conn:
            return self.get(conn, conversation_id, employee_id)

    def list_for(
        self, conn: sa.Connection, employee_id: int, limit: int = MAX_LIST
    ) -> list[ConversationSummary]:
        rows = conn.execute(
            self.engine.statement(q.LIST_CONVERSATIONS),
            {"employee_id": int(employee_id), "limit": int(limit)},
        ).fetchall()
        return [ConversationSummary(str(r[0]), str(r[1]), iso_or_none(r[2]), iso_or_none(r[3])) for r in rows]

    def messages(self, conn: sa.Connection, conversation_id: str, employee_id: int) -> list[Message]:
        self.get(conn, conversation_id, employee_id)
        rows = conn.execute(
            self.engine.statement(q.LIST_MESSAGES), {"conversation_id": conversation_id}
        ).fetchall()
        out = []
        for r in rows:
            raw = _text(r[3]) if r[3] is not None else ""
            out.append(Message(str(r[1]), _text(r[2]), json.loads(raw) if raw else [], iso_or_none(r[4])))
        return out

    def recent_turns(
        self, conversation_id: str, employee_id: int, limit: int = HISTORY_MESSAGES
    ) -> list[Turn]:
        """The last ``limit`` messages (oldest first), after checking ownership."""
        with self.engine.connect() as conn:
            self.get(conn, conversation_id, employee_id)
            rows = conn.execute(
                self.engine.statement(q.RECENT_MESSAGES),
                {"conversation_id": conversation_id, "limit": int(limit)},
            ).fetchall()
        return [Turn(str(r[1]), _text(r[2])) for r in reversed(rows)]

    def append_turn(
        self,
        conversation_id: str,
        employee_id: int,
        question: str,
        answer: str,
        citations: Sequence[Citation],
        *,
        new: bool,
        understood: dict[str, Any] | None = None,
        guarded_sql: str | None = None,
    ) -> int:
        """Store a question and its answer; creates the conversation when ``new``.

        Returns the answer's message id (what a client rates, answering/chat/feedback.py). ``understood`` and
        ``guarded_sql`` are kept with the answer so a rating carries them.
        """
        cited = json.dumps([c.to_dict() for c in citations], ensure_ascii=False)
        with self.engine.begin_exclusive() as conn:
            if new:
                conn.execute(
                    self.engine.statement(q.INSERT_CONVERSATION),
                    {
                        "conversation_id": conversation_id,
                        "employee_id": int(employee_id),
                        "title": title_for(question),
                    },
                )
            else:
                touched = conn.execute(
                    self.engine.statement(q.TOUCH_CONVERSATION),
                    {"conversation_id": conversation_id, "employee_id": int(employee_id)},
                )
                if not touched.rowcount:
                    raise NotFoundError("conversation not found")
            conn.execute(
                self.engine.statement(q.INSERT_MESSAGE),
                {
                    "conversation_id": conversation_id,
                    "role": "user",
                    "content": question,
                    "citations": None,
                    "understood": None,
                    "guarded_sql": None,
                },
            )
            conn.execute(
                self.engine.statement(q.INSERT_MESSAGE),
                {
                    "conversation_id": conversation_id,
                    "role": "assistant",
                    "content": answer,
                    "citations": cited,
                    "understood": json.dumps(understood, ensure_ascii=False) if understood else None,
                    "guarded_sql": guarded_sql,
                },
            )
            return int(
                conn.execute(
                    self.engine.statement(q.LAST_MESSAGE_ID), {"conversation_id": conversation_id}
                ).scalar_one()
            )
