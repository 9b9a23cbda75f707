"""Chat storage, API tokens, SQL-source state and the guarded executors, on every engine.

The conformance suite's first 8 behaviours ran on both engines; these extend it to
every other statement set the product sends (chat_sql, the token statements, sql_query_sql's
state statements and wrappers, aggregate_sql and the guarded executor), so an Oracle run
executes each of them at least once. Same fixtures as test_engine_conformance.py: SQLite
always, Oracle when one is available (skipped here with one line). The assertions are about
what comes back, never about which engine ran.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import sqlalchemy as sa
from oracle_helpers import require_oracle, run_user_file

from oracle_rag.answering.aggregate.service import AggregateService
from oracle_rag.answering.chat.citations import Citation
from oracle_rag.answering.chat.conversations import ConversationStore, new_conversation_id
from oracle_rag.callers import tokens as auth
from oracle_rag.callers.caller import Caller
from oracle_rag.errors import GuardrailError, NotFoundError
from oracle_rag.indexing.refresh import SourceRefresher
from oracle_rag.sources import SqlSource

T0 = dt.datetime(2026, 3, 1, 12, 0, tzinfo=dt.UTC)


def _ids(system, sql: str) -> list[int]:  # type: ignore[no-untyped-def]
    with system.engine.connect() as conn:
        return [int(r[0]) for r in conn.execute(sa.text(sql))]


def _developer(system) -> int:  # type: ignore[no-untyped-def]
    return _ids(system, "SELECT EMPLOYEE_ID FROM EMPLOYEE WHERE ROLE = 'developer' ORDER BY EMPLOYEE_ID")[0]


# -- chat storage (chat_sql: conversations and messages) ---------------------------------------


def test_conversations_and_messages_round_trip_and_stay_private(engine_system) -> None:  # type: ignore[no-untyped-def]
    store = ConversationStore(engine_system.engine)
    me, other = (
        _developer(engine_system),
        _ids(engine_system, "SELECT EMPLOYEE_ID FROM EMPLOYEE WHERE ROLE = 'manager' ORDER BY 1")[0],
    )
    conv = new_conversation_id()
    cited = [Citation("TASK", "7", "Fix login timeout")]
    long_answer = "Respuesta: sincronización. " * 400  # > 4000 bytes, into a CLOB
    store.append_turn(conv, me, "¿Qué bloquea el login?", long_answer, cited, new=True)
    store.append_turn(conv, me, "And then?", "Then the sprint ends.", [], new=False)
    with engine_system.engine.connect() as conn:
        summary = store.get(conn, conv, me)
        listed = store.list_for(conn, me)
        messages = store.messages(conn, conv, me)
        with pytest.raises(NotFoundError):
            store.get(conn, conv, other)  # someone else's conversation does not exist for them
        assert all(c.conversation_id != conv for c in store.list_for(conn, other))
    assert summary.conversation_id == conv and summary.title.startswith("¿Qué bloquea")
    assert [c.conversation_id for c in listed] == [conv]
    assert [(m.role, m.content) for m in messages] == [
        ("user", "¿Qué bloquea el login?"),
        ("assistant", long_answer),
        ("user", "And then?"),
        ("assistant", "Then the sprint ends."),
    ]
    assert messages[1].citations and messages[1].citations[0]["source_id"] == "7"
    turns = store.recent_turns(conv, me, limit=2)
    assert [t.content for t in turns] == ["And then?", "Then the sprint ends."]
    with pytest.raises(NotFoundError):
        store.append_turn(conv, other, "hijack", "no", [], new=False)


# -- API tokens (chat_sql: INSERT_TOKEN, TOKEN_BY_HASH, VERIFY_TOKEN, LIST_TOKENS, REVOKE_*) ----


def test_tokens_verify_list_and_revoke(engine_system) -> None:  # type: ignore[no-untyped-def]
    engine = engine_system.engine
    me = _developer(engine_system)
    issued = auth.create_token(engine, me, label="conformance", expires_days=30)
    second = auth.create_token(engine, me, label="conformance")
    with engine.connect() as conn:
        assert auth.verify_token(conn, engine, issued.token) == me
        caller = auth.caller_for_token(conn, engine, issued.token)
        assert caller is not None and caller.employee_id == me and caller.role == "developer"
        assert auth.verify_token(conn, engine, auth.new_token()) is None  # well-formed, unknown
    listed = {t.token_id: t for t in auth.list_tokens(engine, me)}
    assert {issued.token_id, second.token_id} <= set(listed)
    assert listed[issued.token_id].expires_at is not None and listed[second.token_id].expires_at is None
    assert auth.revoke_token(engine, issued.token_id) is True
    assert auth.revoke_token(engine, issued.token_id) is False  # already revoked
    with engine.connect() as conn:
        assert auth.verify_token(conn, engine, issued.token) is None
        assert auth.verify_token(conn, engine, second.token) == me
    assert auth.revoke_label(engine, "conformance") == 1
    with engine.connect() as conn:
        assert auth.verify_token(conn, engine, second.token) is None
    with pytest.raises(NotFoundError):
        auth.create_token(engine, 999_999)


# -- SQL-source state (sql_query_sql: state statements, document MERGE, delta wrappers) --------


def test_sql_source_state_full_incremental_change_and_drop(engine_system) -> None:  # type: ignore[no-untyped-def]
    engine = engine_system.engine
    query = (
        "SELECT TASK_ID AS id, TITLE AS content, STATUS AS status, DUE_DATE AS due "
        "FROM TASK WHERE DUE_DATE IS NOT NULL"
    )
    source = SqlSource("task-due", query, updated_at_column="DUE")
    refresher = SourceRefresher(engine, [source])
    try:
        (first,) = refresher.sync(now=T0)
        assert first.outcome == "changed" and first.new > 0, first.summary()
        total = first.new
        state = refresher.state("task-due")
        assert state.status == "ok" and state.doc_count == total and state.watermark is not None
        assert state.last_refresh_at is not None and state.last_refresh_at.utcoffset() is not None
        row_id = _ids(engine_system, "SELECT MIN(TASK_ID) FROM TASK WHERE DUE_DATE IS NOT NULL")[0]
        meta = refresher.metadata("task-due", str(row_id))
        assert meta is not None and meta["id"] == str(row_id) and "status" in meta
        again = refresher.refresh("task-due", now=T0 + dt.timedelta(hours=1))  # incremental: nothing new
        assert again.outcome == "unchanged" and again.documents == total, again.summary()
        latest = _ids(
            engine_system,
            "SELECT TASK_ID FROM TASK WHERE DUE_DATE IS NOT NULL ORDER BY DUE_DATE DESC, TASK_ID",
        )[0]
        with engine.begin() as conn:  # the newest row changes: an incremental read sees it (>= watermark)
            conn.execute(
                sa.text("UPDATE TASK SET TITLE = :t WHERE TASK_ID = :i"),
                {"t": "Renamed for the conformance suite", "i": latest},
            )
        changed = refresher.refresh("task-due", now=T0 + dt.timedelta(hours=2))
        assert changed.updated == 1 and changed.documents == total, changed.summary()
        assert refresher.document_count("task-due") == total
        assert [s.name for s in refresher.states()] == ["task-due"]
    finally:
        removed = refresher.drop("task-due")
        refresher.close()
    assert removed == total
    with engine.connect() as conn:
        left = conn.execute(
            sa.text("SELECT COUNT(*) FROM RAG_CHUNK WHERE SOURCE_TYPE = 'task-due'")
        ).scalar_one()
    assert left == 0


# -- the guarded executors (aggregate_sql; SQLite authorizer / Oracle READ ONLY user) -----------


def _aggregate_service(system, request: pytest.FixtureRequest, tmp_path: Path) -> AggregateService:  # type: ignore[no-untyped-def]
    if system.engine.name != "oracle":
        return AggregateService(system.engine, system.settings)
    target = require_oracle(request)
    if not target.ro_url or not target.ro_password_env:
        pytest.skip("no read-only user: set ORACLE_RAG_TEST_RO_URL and ORACLE_RAG_TEST_RO_PASSWORD")
    run_user_file(target, "local/grant_readonly.sql")  # the file itself, as the owner of the views
    from oracle_rag.system import RagSystem

    guarded = RagSystem(
        target.settings(
            tmp_path / "guarded",
            aggregate_database_url=target.ro_url,
            aggregate_db_password_env=target.ro_password_env,
        )
    )
    request.addfinalizer(guarded.close)
    return AggregateService(guarded.engine, guarded.settings)


def test_guarded_sql_is_scoped_capped_and_read_only(
    indexed_system, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The views' rows follow the declared policy over the indexed records: a developer
    sees exactly the tasks they own (the reference task source: owner, missing owner hidden)."""
    engine_system = indexed_system
    service = _aggregate_service(engine_system, request, tmp_path)
    manager = Caller(
        employee_id=_ids(engine_system, "SELECT EMPLOYEE_ID FROM EMPLOYEE WHERE ROLE = 'manager' ORDER BY 1")[
            0
        ],
        role="manager",
    )
    developer = Caller(employee_id=_developer(engine_system), role="developer")
    all_tasks = _ids(engine_system, "SELECT COUNT(*) FROM TASK")[0]
    mine = _ids(engine_system, f"SELECT COUNT(*) FROM TASK WHERE ASSIGNEE_ID = {developer.employee_id}")[0]
    counted = service.run_sql("SELECT COUNT(*) AS N FROM RAG_V_TASK", manager)
    assert [list(r) for r in counted.rows] == [[all_tasks]] and counted.columns[0].upper() == "N"
    scoped = service.run_sql("SELECT COUNT(*) AS N FROM RAG_V_TASK", developer)
    assert 0 < mine < all_tasks and int(scoped.rows[0][0]) == mine
    grouped = service.run_sql(
        "SELECT STATUS, COUNT(*) AS N FROM RAG_V_TASK GROUP BY STATUS ORDER BY STATUS", manager
    )
    assert sum(int(r[1]) for r in grouped.rows) == all_tasks
    for refused in ("DELETE FROM RAG_V_TASK", "SELECT * FROM TASK", "SELECT * FROM RAG_CHUNK"):
        with pytest.raises(GuardrailError):
            service.run_sql(refused, manager)
