"""Helpers shared by the chat, web, auth and browser tests (real databases, no mocks)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

# Demo employees (oracle_rag/demo/seed.py): 1-2 admin, 3-8 manager, 9-40 developer.
ADMIN = 1
MANAGER = 3
DEV_A = 9
DEV_B = 10


@dataclass(frozen=True)
class TaskChunk:
    task_id: int
    owner_id: int
    title: str
    content: str


def issue_tokens(rag: Any, employees: tuple[int, ...] = (ADMIN, MANAGER, DEV_A, DEV_B)) -> dict[int, str]:
    from oracle_rag.callers.tokens import create_token

    return {e: create_token(rag.engine, e).token for e in employees}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def task_chunks_of(rag: Any, owner_id: int) -> list[TaskChunk]:
    """The indexed TASK chunks owned by ``owner_id`` (read straight from RAG_CHUNK and TASK)."""
    with rag.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT c.SOURCE_ID, c.OWNER_ID, t.TITLE, c.CONTENT FROM RAG_CHUNK c "
                "JOIN TASK t ON t.TASK_ID = CAST(c.SOURCE_ID AS INTEGER) "
                "WHERE c.SOURCE_TYPE = 'TASK' AND c.OWNER_ID = :o ORDER BY CAST(c.SOURCE_ID AS INTEGER)"
            ),
            {"o": owner_id},
        ).fetchall()
    return [TaskChunk(int(r[0]), int(r[1]), str(r[2]), str(r[3])) for r in rows]


def visible_to(rag: Any, employee_id: int, source_type: str, source_id: str) -> bool:
    """Does the scope rule let a developer see this chunk? (Computed here independently of the engine SQL.)"""
    with rag.engine.connect() as conn:
        owner = conn.execute(
            sa.text("SELECT OWNER_ID FROM RAG_CHUNK WHERE SOURCE_TYPE = :t AND SOURCE_ID = :i"),
            {"t": source_type, "i": source_id},
        ).scalar_one()
    return owner == employee_id or (owner is None and source_type != "TASK")


def rewrite_task(rag: Any, task_id: int, *, title: str | None = None, description: str | None = None) -> None:
    """Change a task as the host application would, enqueue it in the same transaction, re-index."""
    with rag.engine.begin() as conn:
        if title is not None:
            conn.execute(sa.text("UPDATE TASK SET TITLE = :t WHERE TASK_ID = :i"), {"t": title, "i": task_id})
        if description is not None:
            conn.execute(
                sa.text("UPDATE TASK SET DESCRIPTION = :d WHERE TASK_ID = :i"),
                {"d": description, "i": task_id},
            )
        rag.enqueue(conn, "TASK", task_id)
    result = rag.worker().drain()
    assert result.embedded >= 1 and not result.failed_rows


def parse_sse(text: str) -> list[tuple[str, Any]]:
    """Split an SSE body into (event, parsed JSON data); checks the framing on the way."""
    assert text.endswith("\n\n"), "an SSE body ends with a blank line"
    events = []
    for block in text[:-2].split("\n\n"):
        lines = block.split("\n")
        assert len(lines) == 2, f"one event line and one data line per event, got {lines!r}"
        assert lines[0].startswith("event: ") and lines[1].startswith("data: "), lines
        events.append((lines[0][len("event: ") :], json.loads(lines[1][len("data: ") :])))
    return events
