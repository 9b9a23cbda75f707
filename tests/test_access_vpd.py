"""The VPD context hooks (engines/oracle/vpd.py): which package call runs when, with which binds.

No Oracle here. The hooks are installed on a real pool (the embedded
engine's) with each package call rendered as a SELECT of a recording SQL
function, so the real checkout/statement/checkin events and the real scoped
statements of a search decide what is called; the Oracle text of each call
is pinned by tests/test_oracle_golden.py (oracle_vpd_sql.SET_CALLER ...),
and its bind names are checked against the binds the hook passes.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from oracle_rag.callers.caller import Caller
from oracle_rag.config import load_settings
from oracle_rag.engines.oracle import vpd_sql as vpd
from oracle_rag.engines.oracle.engine import OracleEngine
from oracle_rag.engines.oracle.vpd import (
    CONTEXT_TAKEN,
    NOT_PROVISIONED,
    context_call,
    install_vpd_context,
    package_missing,
)
from oracle_rag.engines.records import NO_GROUP
from oracle_rag.errors import ConfigurationError
from oracle_rag.system import RagSystem


def _recording(engine: sa.Engine) -> list[tuple]:
    calls: list[tuple] = []

    @sa.event.listens_for(engine, "connect")
    def _register(dbapi_connection, _record) -> None:
        dbapi_connection.create_function("ctx", -1, lambda *args: calls.append(args) or 0)

    engine.dispose()  # connections opened before the function existed
    render = {
        vpd.SET_SYSTEM: "SELECT ctx('SET_SYSTEM')",
        vpd.SET_CALLER: "SELECT ctx('SET_CALLER', :caller_id, :see_all, :groups)",
        vpd.CLEAR_CALLER: "SELECT ctx('CLEAR_CALLER')",
    }
    install_vpd_context(engine, lambda sql: render[sql])
    return calls


def test_a_scoped_search_runs_as_its_caller_and_the_connection_returns_clean(demo_rag: RagSystem) -> None:
    calls = _recording(demo_rag.engine.sa_engine)
    caller = Caller(7, (), ["ops", "net"])
    demo_rag.retriever().search("payment gateway", 5, caller, "semantic")
    names = [c[0] for c in calls]
    assert names[0] == "SET_SYSTEM" and names[-1] == "CLEAR_CALLER", names
    callers = [c for c in calls if c[0] == "SET_CALLER"]
    assert callers and set(callers) == {("SET_CALLER", 7, 0, '["net","ops"]')}  # padding removed, sorted
    # set once per checkout while the scope is unchanged, cleared at every return
    assert names.count("SET_CALLER") <= names.count("SET_SYSTEM") == names.count("CLEAR_CALLER")
    calls.clear()
    with demo_rag.engine.connect() as conn:  # the product's own (unscoped) work: system context only
        conn.execute(sa.text("SELECT COUNT(*) FROM RAG_CHUNK")).scalar()
    assert [c[0] for c in calls] == ["SET_SYSTEM", "CLEAR_CALLER"]


def test_see_all_and_the_context_binds() -> None:
    assert context_call({"k": 5}) is None and context_call([{"see_all": 1, "caller_id": 3}]) is None
    call = context_call({"see_all": 1, "caller_id": 3, "access_groups": ["b", "a", NO_GROUP, NO_GROUP]})
    assert call == ((3, 1, ("a", "b")), {"caller_id": 3, "see_all": 1, "groups": '["a","b"]'})
    spread = context_call({"see_all": 0, "caller_id": 4, "access_groups_1": "é", "access_groups_2": NO_GROUP})
    assert spread is not None and json.loads(spread[1]["groups"]) == ["é"]


def test_the_oracle_calls_take_exactly_the_binds_the_hook_passes(tmp_path) -> None:
    empty = tmp_path / "empty.toml"
    empty.write_text("")

    def engine(**settings: object) -> OracleEngine:
        return OracleEngine(
            load_settings(
                env={},
                config_file=str(empty),
                database_url="oracle+oracledb://@127.0.0.1:1/?service_name=FREEPDB1",
                **settings,
            )
        )

    wired = engine(access_vpd=True)
    assert (
        wired.text(vpd.SET_CALLER)
        == "BEGIN RAG_ACCESS_CTX_PKG.SET_CALLER(:caller_id, :see_all, :groups); END;"
    )
    assert wired.text(vpd.SET_SYSTEM) == "BEGIN RAG_ACCESS_CTX_PKG.SET_SYSTEM; END;"
    assert wired.text(vpd.CLEAR_CALLER) == "BEGIN RAG_ACCESS_CTX_PKG.CLEAR_CALLER; END;"
    call = context_call({"see_all": 0, "caller_id": 1, "access_groups": []})
    assert call is not None and set(call[1]) == {"caller_id", "see_all", "groups"}
    # The engine is made without connecting: the hooks are on its pool only when access_vpd is set.
    on, off = wired.sa_engine, engine().sa_engine
    for events, name in (
        (lambda e: e.pool.dispatch, "checkout"),
        (lambda e: e.pool.dispatch, "checkin"),
        (lambda e: e.dispatch, "before_cursor_execute"),
    ):
        assert len(getattr(events(on), name)) == len(getattr(events(off), name)) + 1, name


def test_a_missing_package_is_recognised_by_oracles_text() -> None:
    """access_vpd set before `provision --vpd`: SET_SYSTEM fails naming the package; nothing else counts."""
    # The text python-oracledb gives for a call of a package that does not exist.
    missing = Exception(
        "ORA-06550: line 1, column 7:\nPLS-00201: identifier 'RAG_ACCESS_CTX_PKG.SET_SYSTEM' must "
        "be declared\nORA-06550: line 1, column 7:\nPL/SQL: Statement ignored"
    )
    assert package_missing(missing)
    assert not package_missing(
        Exception("ORA-12541: Cannot connect. No listener at host 127.0.0.1 port 1521.")
    )
    assert not package_missing(
        Exception("ORA-06550: line 1, column 7:\nPLS-00201: identifier 'SOMETHING_ELSE' must be declared")
    )
    assert "provision --vpd" in NOT_PROVISIONED and "\n" not in NOT_PROVISIONED


def test_before_provisioning_sessions_run_without_a_context_and_say_so_once(tmp_path, caplog) -> None:
    """On a real pool: while the package is missing, checkouts succeed (logged once per engine), a scoped
    statement sets no caller and checkin clears nothing; once the package exists the next checkout has
    the system context. Another failure propagates as it is. (SQLite stands in for Oracle: its "no such
    column: <name>" carries the text Oracle's PLS-00201 would.)"""
    calls: list[str] = []
    package = '"PLS-00201 RAG_ACCESS_CTX_PKG"'  # a missing table named so SQLite's error reads like Oracle's

    def pool(set_system: str) -> sa.Engine:
        engine = sa.create_engine(f"sqlite:///{tmp_path / 'x.db'}")

        @sa.event.listens_for(engine, "connect")
        def _register(dbapi_connection, _record) -> None:
            dbapi_connection.create_function("ctx", -1, lambda name, *_args: calls.append(name) or 0)

        render = {
            vpd.SET_SYSTEM: set_system,
            vpd.SET_CALLER: f"SELECT ctx('SET_CALLER', :caller_id) FROM {package}",
            vpd.CLEAR_CALLER: f"SELECT ctx('CLEAR_CALLER') FROM {package}",
        }
        install_vpd_context(engine, lambda sql: render[sql])
        return engine

    scoped = sa.text("SELECT :see_all + :caller_id")
    engine = pool(f"SELECT ctx('SET_SYSTEM') FROM {package}")
    with caplog.at_level("WARNING", logger="oracle_rag.engines.oracle.vpd"):
        for _ in range(2):
            with engine.connect() as conn:
                assert conn.execute(scoped, {"see_all": 0, "caller_id": 3}).scalar_one() == 3
    assert calls == [] and [r.getMessage() for r in caplog.records] == [NOT_PROVISIONED]
    with engine.begin() as conn:  # provisioning creates the package
        conn.exec_driver_sql(f"CREATE TABLE {package} (X INTEGER)")
        conn.exec_driver_sql(f"INSERT INTO {package} VALUES (1)")
    calls.clear()
    with engine.connect() as conn:
        conn.execute(scoped, {"see_all": 0, "caller_id": 3}).scalar_one()
    assert calls == ["SET_SYSTEM", "SET_CALLER", "CLEAR_CALLER"]
    with pytest.raises(sa.exc.OperationalError):
        with pool("SELECT [something else]").connect():
            pass
    # another schema's provisioning re-bound the namespace: this schema's SET_SYSTEM gets ORA-01031
    with pytest.raises(ConfigurationError) as taken:
        with pool("SELECT [ORA-01031: insufficient privileges]").connect():
            pass
    assert taken.value.message == CONTEXT_TAKEN


@pytest.mark.parametrize(
    ("policies", "system", "refused"), [(3, None, True), (3, "1", False), (0, None, False)]
)
def test_the_products_own_work_refuses_a_session_policies_would_blind(
    tmp_path, policies: int, system: str | None, refused: bool
) -> None:
    """OracleEngine.require_system_access reads USER_POLICIES and the session's context (Oracle's text, run on
    SQLite with the dictionary view and SYS_CONTEXT stood in): policies without the system context refuse."""
    empty = tmp_path / "empty.toml"
    empty.write_text("")
    oracle = OracleEngine(
        load_settings(
            env={},
            config_file=str(empty),
            database_url="oracle+oracledb://@127.0.0.1:1/?service_name=FREEPDB1",
        )
    )
    stand_in = sa.create_engine(f"sqlite:///{tmp_path / 'dict.db'}")
    with stand_in.begin() as conn:
        conn.connection.driver_connection.create_function(
            "SYS_CONTEXT", 2, lambda ns, attr: system if (ns, attr) == ("RAG_ACCESS_CTX", "SYSTEM") else None
        )
        conn.exec_driver_sql("CREATE TABLE dual (DUMMY TEXT)")
        conn.exec_driver_sql("INSERT INTO dual VALUES ('X')")
        conn.exec_driver_sql("CREATE TABLE USER_POLICIES (OBJECT_NAME TEXT, POLICY_NAME TEXT)")
        for i, table in enumerate(("RAG_CHUNK", "RAG_CHUNK_ACL", "RAG_CHUNK_TERM", "OTHER")[:policies]):
            conn.exec_driver_sql("INSERT INTO USER_POLICIES VALUES (?, ?)", (table, f"P{i}"))
        if refused:
            with pytest.raises(ConfigurationError, match="the worker refused.*no access context.*access_vpd"):
                oracle.require_system_access(conn, "the worker")
        else:
            oracle.require_system_access(conn, "the worker")
