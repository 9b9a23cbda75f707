"""The record view (citation side panel, ``/api/chunks/...``): a long record whole, opened at the cited passage.

A record longer than one window is stored as several overlapping chunks;
the view used to show chunk 0 only ("summarize the discussion on task 508"
showed 2 of its 4 comments). Real SQLite, real indexing, the real Flask app.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from chat_helpers import DEV_A, DEV_B, bearer, issue_tokens, rewrite_task, task_chunks_of

from oracle_rag.answering.chat.chunks import chunk_detail, find_passage
from oracle_rag.answering.chat.citations import snippet
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import NotFoundError
from oracle_rag.web import create_app

SENTENCES = [f"Comment {n:03d}: the retry queue drained batch {n} after the failover." for n in range(1, 121)]


def stored_chunks(rag, task_id: int) -> list[str]:
    with rag.engine.connect() as conn:
        rows = conn.execute(
            sa.text(
                "SELECT CONTENT FROM RAG_CHUNK WHERE SOURCE_TYPE = 'TASK' AND SOURCE_ID = :i "
                "ORDER BY CHUNK_NO"
            ),
            {"i": str(task_id)},
        ).fetchall()
    return [str(r[0]) for r in rows]


@pytest.fixture
def long_task(demo_rag) -> int:
    task = task_chunks_of(demo_rag, DEV_A)[0]
    rewrite_task(demo_rag, task.task_id, description="\n".join(SENTENCES))
    return task.task_id


def test_a_long_record_is_shown_whole_once_in_order(demo_rag, long_task: int) -> None:
    chunks = stored_chunks(demo_rag, long_task)
    assert len(chunks) >= 3  # several overlapping windows
    with demo_rag.engine.connect() as conn:
        detail = chunk_detail(conn, demo_rag.engine, Caller(DEV_A, "developer"), "task", str(long_task))
    text = detail.content
    positions = [text.find(s) for s in SENTENCES]
    assert all(p >= 0 for p in positions) and positions == sorted(positions)  # every comment, in order
    assert all(text.count(s) == 1 for s in SENTENCES)  # the overlaps once
    assert text.startswith(chunks[0])
    assert len(detail.windows) == len(chunks)
    assert [text[a:b] for a, b in detail.windows] == chunks  # each window is where the view says
    # the same scope as every search: another developer's task does not exist for them
    with demo_rag.engine.connect() as conn, pytest.raises(NotFoundError):
        chunk_detail(conn, demo_rag.engine, Caller(DEV_B, "developer"), "TASK", str(long_task))


def test_the_api_says_where_the_cited_passage_is(demo_rag, long_task: int) -> None:
    tokens = issue_tokens(demo_rag, (DEV_A, DEV_B))
    client = create_app(
        {"ORACLE_RAG_SYSTEM": demo_rag, "ORACLE_RAG_LLM": None, "TESTING": True}
    ).test_client()
    last = stored_chunks(demo_rag, long_task)[-1]
    cited = snippet(last, query="batch 117 failover")  # what a citation of the last window carries
    assert cited.startswith("\u2026") and "117" in cited
    response = client.get(
        f"/api/chunks/TASK/{long_task}", query_string={"passage": cited}, headers=bearer(tokens[DEV_A])
    )
    assert response.status_code == 200
    body = response.get_json()
    content, windows, passage = body["content"], body["chunks"], body["passage"]
    assert "Comment 001:" in content and "Comment 120:" in content
    assert [w["chunk_no"] for w in windows] == list(range(len(windows)))
    assert passage is not None and "Comment 117" in content[passage["start"] : passage["end"]]
    assert windows[-1]["start"] <= passage["start"] < passage["end"] <= windows[-1]["end"]
    hidden = client.get(
        f"/api/chunks/TASK/{long_task}", query_string={"passage": cited}, headers=bearer(tokens[DEV_B])
    )
    assert hidden.status_code == 404


def test_find_passage_matches_across_flattened_whitespace() -> None:
    text = "[TASK #7] Fix it\nStatus: TODO\n\nFirst line.\nSecond   line here."
    assert find_passage(text, "\u2026line. Second line\u2026") == (
        text.index("line.\nSecond"),
        text.index(" here"),
    )
    assert find_passage(text, "not there") is None
    assert find_passage(text, "\u2026") is None
