"""A second wall: the VPD policy on RAG_CHUNK / RAG_CHUNK_ACL, run on Oracle (Oracle only).

Provisioned the way docs/access.md tells a user to: ``local/grant_vpd.sql`` as SYS (CREATE ANY
CONTEXT, EXECUTE ON DBMS_RLS), then ``oracle-rag provision --vpd`` through the CLI. Then, on the
product's own pooled sessions (a RagSystem with ``access_vpd = true``, so engines/oracle/vpd.py's
hooks run):

* a statement that forgets the scope predicate (a raw ``SELECT`` on RAG_CHUNK / RAG_CHUNK_ACL)
  returns exactly what a plain Python model of the rule allows once the product has set the
  caller (a scoped statement through the hook), for a caller with groups, one with see-all, and
  the product's own work (``SET_SYSTEM`` at checkout: everything);
* no session can set the context itself: ``DBMS_SESSION.SET_CONTEXT`` from outside the package
  raises ORA-01031, for the application user and the read-only user alike, and the read-only
  user cannot call the package (no EXECUTE);
* ``CLEAR_CALLER`` at checkin: the returned connection holds no context (a raw read sees nothing)
  and the next checkout of the same connection is the system context, with no caller left;
* each policy function returns, for the caller the hook set, exactly the text
  ``oracle_vpd_sql.PREDICATES`` generated from ``engine_sql.scope_predicate``
  (tests/test_vpd_predicate.py checks that text against the bind form on
  SQLite), and NULL for see-all and the system context;
* the guarded aggregate views, read by the read-only user (which has no context and cannot set
  one) under its CLIENT_IDENTIFIER token, still give each caller exactly its rows: the policy
  reads that session's caller from RAG_GUARDED_CALLER, as the views do.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from oracle_helpers import OracleTarget, cli, new_system, run_user_file

from oracle_rag.answering.aggregate.service import AggregateService
from oracle_rag.callers.caller import Caller
from oracle_rag.engines.engine_sql import SCOPE
from oracle_rag.engines.oracle import vpd_sql as vpd
from oracle_rag.engines.records import Scope

# The product's scoped read: any statement carrying the scope binds makes the hook set the caller.
SCOPED_COUNT = sa.text(f"SELECT COUNT(*) FROM RAG_CHUNK c WHERE {SCOPE}").bindparams(
    sa.bindparam("access_groups", expanding=True)
)
RAW_CHUNKS = "SELECT CHUNK_ID FROM RAG_CHUNK"  # no predicate: what VPD alone lets through
RAW_ACL = "SELECT PRINCIPAL, SOURCE_TYPE, SOURCE_ID FROM RAG_CHUNK_ACL"
RAW_POSTINGS = (
    "SELECT DISTINCT CHUNK_ID FROM RAG_CHUNK_TERM"  # the BM25 postings (V13: they carry the access)
)
GROUP = "ops"
# Enough groups that the context's JSON array is longer than SYS_CONTEXT's default 256 bytes,
# sorted before GROUP so GROUP sits past byte 256 (the bug the 4000-byte length fixed).
MANY_GROUPS = tuple(f"aa-team-{i:03d}" for i in range(30)) + (GROUP,)
# Past a context value's 4 KB (DBMS_SESSION.SET_CONTEXT): 400 groups, ~9.6 KB of JSON, GROUP last.
HUGE_GROUPS = tuple(f"aa-department-team-{i:04d}" for i in range(400)) + (GROUP,)


@dataclass
class World:
    system: Any  # a RagSystem with access_vpd = true
    chunks: dict[int, tuple[str, str, int | None, int]]  # CHUNK_ID -> (type, id, owner, public)
    acl: set[tuple[str, str, str]]  # (principal, type, id)
    failed: set[str]
    owner: int  # a caller who owns some chunks

    def allowed(self, caller_id: int, see_all: bool, groups: tuple[str, ...]) -> set[int]:
        """The rule of engine_sql.SCOPE, in Python."""
        if see_all:
            return set(self.chunks)
        shared = {(t, i) for p, t, i in self.acl if p in groups}
        return {
            cid
            for cid, (t, i, owner, public) in self.chunks.items()
            if t not in self.failed and (public == 1 or owner == caller_id or (t, i) in shared)
        }


def _rows(conn: sa.Connection, sql: str) -> list[tuple]:
    return [tuple(r) for r in conn.exec_driver_sql(sql)]


@pytest.fixture
def world(oracle_system, oracle_target: OracleTarget, tmp_path: Path) -> Iterator[World]:  # type: ignore[no-untyped-def]
    oracle_system.backfill()
    assert oracle_system.worker().drain().failed_rows == 0
    with oracle_system.engine.begin() as conn:
        chunks = {
            int(r[0]): (r[1], r[2], None if r[3] is None else int(r[3]), int(r[4]))
            for r in conn.exec_driver_sql(
                "SELECT CHUNK_ID, SOURCE_TYPE, SOURCE_ID, ACCESS_OWNER, ACCESS_PUBLIC FROM RAG_CHUNK"
            )
        }
        owners = sorted({o for _t, _i, o, _p in chunks.values() if o is not None})
        owner = owners[0]
        # Three records the owner neither owns nor sees as public, shared with GROUP through the ACL.
        hidden = sorted({(t, i) for t, i, o, p in chunks.values() if o != owner and p == 0})[:3]
        for t, i in hidden:
            conn.execute(
                sa.text("INSERT INTO RAG_CHUNK_ACL (PRINCIPAL, SOURCE_TYPE, SOURCE_ID) VALUES (:p, :t, :i)"),
                {"p": GROUP, "t": t, "i": i},
            )
        conn.execute(
            sa.text("INSERT INTO RAG_CHUNK_ACL (PRINCIPAL, SOURCE_TYPE, SOURCE_ID) VALUES (:p, :t, :i)"),
            {"p": "someone-else", "t": hidden[0][0], "i": hidden[0][1]},
        )
        # One public source type whose permission data "failed": hidden from callers without see-all.
        failed = sorted({t for t, _i, _o, p in chunks.values() if p == 1 and t != hidden[0][0]})[:1]
        for t in failed:
            conn.execute(
                sa.text(
                    "INSERT INTO RAG_ACCESS_FAILURE (SOURCE_TYPE, FAILED_AT, ERROR_CODE) "
                    "VALUES (:t, '2026-01-01T00:00:00', 'TEST')"
                ),
                {"t": t},
            )
        acl = {tuple(r) for r in _rows(conn, RAW_ACL)}
    assert len(hidden) == 3 and failed, "the seeded data no longer has private and public chunks to test with"

    run_user_file(oracle_target, "local/grant_vpd.sql")  # as SYS (skips without a SYS password)
    out = cli(oracle_target, ["provision", "--vpd"], tmp_path / "cli")
    assert "created policy RAG_CHUNK_ACCESS" in out and "created policy RAG_CHUNK_ACL_ACCESS" in out, out
    assert "created policy RAG_CHUNK_TERM_ACCESS" in out, out
    system = new_system(oracle_target, tmp_path / "vpd", access_vpd=True)
    try:
        yield World(system, chunks, acl, set(failed), owner)
    finally:
        system.close()
        conn = oracle_target.connect_app()  # leave no policy behind for the next test's schema
        try:
            with conn.cursor() as cur:
                for table, policy in (
                    ("RAG_CHUNK", "RAG_CHUNK_ACCESS"),
                    ("RAG_CHUNK_ACL", "RAG_CHUNK_ACL_ACCESS"),
                    ("RAG_CHUNK_TERM", "RAG_CHUNK_TERM_ACCESS"),
                ):
                    cur.execute("BEGIN DBMS_RLS.DROP_POLICY(USER, :t, :p); END;", {"t": table, "p": policy})
        finally:
            conn.close()


def test_without_access_vpd_the_schema_owner_reads_nothing(world: World, oracle_system) -> None:  # type: ignore[no-untyped-def]
    """What `provision --vpd` warns about: a session the hooks did not give a context fails closed."""
    with oracle_system.engine.connect() as conn:
        assert _rows(conn, RAW_CHUNKS) == [] and _rows(conn, RAW_ACL) == []


def test_the_products_own_work_refuses_a_session_the_policies_would_blind(
    world: World, oracle_system
) -> None:  # type: ignore[no-untyped-def]
    """Policies exist and access_vpd is unset: migrate, the worker and index rebuild refuse (they would read
    no chunk and write records without postings); with access_vpd set they run."""
    from oracle_rag.errors import ConfigurationError
    from oracle_rag.indexing.index_maintenance import rebuild
    from oracle_rag.migrations import migrate_all

    for run in (
        lambda: migrate_all(oracle_system.engine),
        lambda: oracle_system.worker().drain(),
        lambda: rebuild(oracle_system.engine),
    ):
        with pytest.raises(ConfigurationError, match="no access context"):
            run()
    migrate_all(world.system.engine)
    assert world.system.worker().drain().failed_rows == 0


def test_access_vpd_set_before_provisioning_runs_until_the_package_exists(
    oracle_system, oracle_target: OracleTarget, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """The documented order: access_vpd first. Without the package (and so without policies) the product
    works and logs once; `provision --vpd` then gives the next checkout its context."""
    conn = oracle_target.connect_app()  # no package left by an earlier test (ORA-04043: there was none)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "BEGIN EXECUTE IMMEDIATE 'DROP PACKAGE RAG_ACCESS_CTX_PKG'; "
                "EXCEPTION WHEN OTHERS THEN IF SQLCODE != -4043 THEN RAISE; END IF; END;"
            )
    finally:
        conn.close()
    system = new_system(oracle_target, tmp_path / "early", access_vpd=True)
    try:
        system.backfill()
        assert system.worker().drain().failed_rows == 0
        with system.engine.connect() as conn:
            assert _rows(conn, RAW_CHUNKS)
    finally:
        system.close()


@pytest.mark.parametrize(
    "see_all, groups",
    [(False, MANY_GROUPS), (False, HUGE_GROUPS), (False, ()), (True, ())],
    ids=["groups", "groups-past-4kb", "owner-only", "see-all"],
)
def test_a_statement_without_the_predicate_returns_only_what_the_policy_allows(
    world: World, see_all: bool, groups: tuple[str, ...]
) -> None:
    caller = Scope(caller_id=world.owner, see_all=see_all, groups=groups)
    expected = world.allowed(world.owner, see_all, groups)
    with world.system.engine.connect() as conn:
        # Checkout: SET_SYSTEM, the product's own work reads everything.
        assert {r[0] for r in _rows(conn, RAW_CHUNKS)} == set(world.chunks)
        postings = {int(r[0]) for r in _rows(conn, RAW_POSTINGS)}
        scoped = int(conn.execute(SCOPED_COUNT, caller.binds()).scalar_one())  # the hook: SET_CALLER
        assert conn.execute(
            sa.text("SELECT SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID') FROM DUAL")
        ).scalar_one() == str(world.owner)
        raw = {int(r[0]) for r in _rows(conn, RAW_CHUNKS)}  # forgets the predicate
        acl = {tuple(r) for r in _rows(conn, RAW_ACL)}
        raw_postings = {int(r[0]) for r in _rows(conn, RAW_POSTINGS)}
    assert raw == expected and scoped == len(expected)
    assert postings and raw_postings == postings & expected  # the postings' own policy, same rule
    assert acl == (world.acl if see_all else {a for a in world.acl if a[0] in groups})
    if not see_all:
        assert raw < set(world.chunks)  # the wall took something away
        others = {cid for cid, (t, _i, _o, _p) in world.chunks.items() if t in world.failed}
        assert others and not raw & others  # a failed source is hidden even where public
    if groups:
        shared = {cid for cid, (t, i, _o, _p) in world.chunks.items() if (GROUP, t, i) in world.acl}
        assert shared and shared <= raw  # GROUP, past the 256th byte of the context value, still counts


@pytest.mark.parametrize("see_all", [False, True], ids=["caller", "see-all"])
def test_the_policy_functions_return_the_generated_text(world: World, see_all: bool) -> None:
    caller = Scope(caller_id=world.owner, see_all=see_all, groups=MANY_GROUPS)
    functions = (
        ("CHUNK_PREDICATE", "RAG_CHUNK"),
        ("ACL_PREDICATE", "RAG_CHUNK_ACL"),
        ("TERM_PREDICATE", "RAG_CHUNK_TERM"),
    )

    def returned(conn: sa.Connection, function: str, table: str) -> str | None:
        return conn.execute(
            sa.text(f"SELECT RAG_ACCESS_CTX_PKG.{function}(USER, :t) FROM DUAL"), {"t": table}
        ).scalar_one()

    with world.system.engine.connect() as conn:
        assert all(returned(conn, *f) is None for f in functions)  # checkout: SET_SYSTEM, no predicate
        conn.execute(SCOPED_COUNT, caller.binds()).scalar_one()  # the hook: SET_CALLER
        for function, table in functions:
            expected = None if see_all else vpd.PREDICATES[function][0]
            assert returned(conn, function, table) == expected, function


def _connect(target: OracleTarget, *, readonly: bool) -> Any:
    import oracledb

    if not readonly:
        return target.connect_app()
    if not target.ro_url or not target.ro_password_env:
        pytest.skip("no read-only user: set ORACLE_RAG_TEST_RO_URL and ORACLE_RAG_TEST_RO_PASSWORD")
    user = sa.engine.make_url(target.ro_url).username
    return oracledb.connect(user=user, password=os.environ[target.ro_password_env], dsn=target.dsn)


@pytest.mark.parametrize("readonly", [False, True], ids=["application-user", "read-only-user"])
def test_no_session_can_set_the_context_itself(
    world: World, oracle_target: OracleTarget, readonly: bool
) -> None:
    conn = _connect(oracle_target, readonly=readonly)
    try:
        with conn.cursor() as cur:
            for attribute in ("SYSTEM", "CALLER_ID", "SEE_ALL"):
                with pytest.raises(Exception) as err:
                    cur.execute(
                        "BEGIN DBMS_SESSION.SET_CONTEXT('RAG_ACCESS_CTX', :a, '1'); END;", {"a": attribute}
                    )
                assert "ORA-01031" in str(err.value), str(err.value)
            cur.execute(
                "SELECT SYS_CONTEXT('RAG_ACCESS_CTX', 'SYSTEM'), SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID') "
                "FROM DUAL"
            )
            assert cur.fetchone() == (None, None)
            if readonly:  # no EXECUTE on the package: the trusted path is closed to it too
                with pytest.raises(Exception) as err:
                    cur.execute(f"BEGIN {oracle_target.user}.RAG_ACCESS_CTX_PKG.SET_SYSTEM; END;")
                assert re.search(r"PLS-00201|ORA-06550|ORA-01031", str(err.value)), str(err.value)
            else:  # the owner, without the product's hooks: no context, no row
                cur.execute("SELECT COUNT(*) FROM RAG_CHUNK")
                assert cur.fetchone() == (0,)
    finally:
        conn.close()


def test_checkin_clears_the_caller_and_the_next_checkout_is_the_system_context(world: World) -> None:
    caller = Scope(caller_id=world.owner, see_all=False, groups=MANY_GROUPS)
    pool = world.system.engine.sa_engine
    with pool.connect() as conn:
        conn.execute(SCOPED_COUNT, caller.binds()).scalar_one()
        dbapi = conn.connection.dbapi_connection
        assert {int(r[0]) for r in _rows(conn, RAW_CHUNKS)} == world.allowed(world.owner, False, MANY_GROUPS)
    # Checked in: CLEAR_CALLER ran. The pooled session itself holds no context, so it reads nothing.
    cur = dbapi.cursor()
    try:
        cur.execute(
            "SELECT SYS_CONTEXT('RAG_ACCESS_CTX', 'SYSTEM'), SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID'), "
            "DBMS_LOB.SUBSTR(RAG_ACCESS_CTX_PKG.CALLER_GROUPS, 100, 1) FROM DUAL"
        )
        assert cur.fetchone() == (None, None, "[]")
        cur.execute("SELECT COUNT(*) FROM RAG_CHUNK")
        assert cur.fetchone() == (0,)
    finally:
        cur.close()
    # The next checkout of that same session: SET_SYSTEM, no caller left over.
    with pool.connect() as conn:
        assert conn.connection.dbapi_connection is dbapi
        row = conn.execute(
            sa.text(
                "SELECT SYS_CONTEXT('RAG_ACCESS_CTX', 'SYSTEM'), "
                "SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID') FROM DUAL"
            )
        ).one()
        assert tuple(row) == ("1", None)
        assert {int(r[0]) for r in _rows(conn, RAW_CHUNKS)} == set(world.chunks)


def test_the_aggregate_views_keep_each_callers_rows_behind_the_wall(
    world: World, oracle_target: OracleTarget, tmp_path: Path
) -> None:
    if not oracle_target.ro_url or not oracle_target.ro_password_env:
        pytest.skip("no read-only user: set ORACLE_RAG_TEST_RO_URL and ORACLE_RAG_TEST_RO_PASSWORD")
    run_user_file(oracle_target, "local/grant_readonly.sql")
    system = new_system(
        oracle_target,
        tmp_path / "guarded",
        access_vpd=True,
        aggregate_database_url=oracle_target.ro_url,
        aggregate_db_password_env=oracle_target.ro_password_env,
        aggregate_timeout_s=5.0,
    )
    try:
        service = AggregateService(system.engine, system.settings)
        with system.engine.connect() as conn:
            all_tasks = int(conn.execute(sa.text("SELECT COUNT(*) FROM TASK")).scalar_one())
        for caller, groups in (
            (Caller(world.owner, role="developer", groups=MANY_GROUPS), MANY_GROUPS),
            (Caller(world.owner, role="developer"), ()),
            (Caller(world.owner, role="manager"), None),
        ):
            if groups is None:
                expected = all_tasks
            else:
                allowed = world.allowed(world.owner, False, groups)
                expected = len(
                    {i for cid, (t, i, _o, _p) in world.chunks.items() if t == "TASK" and cid in allowed}
                )
            result = service.run_sql("SELECT COUNT(*) AS N FROM RAG_V_TASK", caller)
            assert int(result.rows[0][0]) == expected, (caller, groups)
            assert expected > 0
    finally:
        system.close()


def test_provisioning_never_takes_over_a_context_bound_elsewhere(
    oracle_system, oracle_target: OracleTarget, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """RAG_ACCESS_CTX is one namespace per database: bound to another package (as another schema's
    provisioning would leave it), `provision --vpd` refuses instead of re-binding it; once a DBA drops it,
    provisioning creates it for this schema and a re-run keeps it."""
    run_user_file(oracle_target, "local/grant_vpd.sql")  # as SYS (skips without a SYS password)
    conn = oracle_target.connect_app()
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE OR REPLACE CONTEXT RAG_ACCESS_CTX USING SOMEONE_ELSES_PKG")
        with pytest.raises(
            RuntimeError, match="RAG_ACCESS_CTX exists and this schema's RAG_ACCESS_CTX_PKG cannot set it"
        ):
            cli(oracle_target, ["provision", "--vpd"], tmp_path / "taken")
        with conn.cursor() as cur:
            cur.execute("DROP CONTEXT RAG_ACCESS_CTX")
        for run in ("first", "again"):
            out = cli(oracle_target, ["provision", "--vpd"], tmp_path / run)
            assert "created context RAG_ACCESS_CTX (this schema's)" in out, out
    finally:
        with conn.cursor() as cur:
            for table, policy in (
                ("RAG_CHUNK", "RAG_CHUNK_ACCESS"),
                ("RAG_CHUNK_ACL", "RAG_CHUNK_ACL_ACCESS"),
                ("RAG_CHUNK_TERM", "RAG_CHUNK_TERM_ACCESS"),
            ):
                cur.execute(
                    "BEGIN DBMS_RLS.DROP_POLICY(USER, :t, :p); EXCEPTION WHEN OTHERS THEN NULL; END;",
                    {"t": table, "p": policy},
                )
        conn.close()


def test_a_package_body_that_does_not_compile_is_refused(oracle_system, oracle_target: OracleTarget) -> None:  # type: ignore[no-untyped-def]
    """CREATE PACKAGE BODY with errors only warns (DPY-7000): provisioning reads USER_OBJECTS/USER_ERRORS."""
    from oracle_rag.errors import DatabaseError
    from oracle_rag.indexing.provision import _require_valid_package

    engine = oracle_system.engine
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE OR REPLACE PACKAGE RAG_ACCESS_CTX_PKG AS PROCEDURE SET_SYSTEM; END;")
        conn.exec_driver_sql(
            "CREATE OR REPLACE PACKAGE BODY RAG_ACCESS_CTX_PKG AS PROCEDURE SET_SYSTEM IS "
            "BEGIN NO_SUCH_PROCEDURE; END; END;"
        )
        with pytest.raises(DatabaseError, match="PACKAGE BODY INVALID"):
            _require_valid_package(engine, conn)
        conn.exec_driver_sql("DROP PACKAGE RAG_ACCESS_CTX_PKG")
