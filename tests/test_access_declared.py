"""Access declared per source and per deployment, on a non-demo schema (teams and tickets).

Real parts: the embedded engine with the real ONNX model, SQL-query sources
on the product's own SQLite file, the declared ``groups_query`` /
``roles_query`` read on the read-only session, the Retriever, the CLI.
What a caller may see is computed here from the declared policy in plain
Python, never through the product's predicate.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import sqlalchemy as sa

from oracle_rag.callers.access import CallerDirectory, directory_for, load_caller
from oracle_rag.callers.caller import Caller
from oracle_rag.engines import RecordAccess, facets_value
from oracle_rag.errors import AccessError, ConfigurationError, NotFoundError
from oracle_rag.sources.access import LEGACY, OWNER_ONLY, PUBLIC, AccessPolicy, record_access
from oracle_rag.sources.sql_query import SqlSource
from oracle_rag.system import RagSystem

TICKETS = [  # id, subject, body, owner, team
    (1, "Printer jam", "The third floor printer jams on duplex pages. Helpdesk record.", 101, "ops"),
    (2, "VPN drops", "The VPN drops every hour for remote staff. Helpdesk record.", 102, "net"),
    (3, "Laptop order", "Order two laptops for the new designers. Helpdesk record.", None, "ops"),
    (4, "Orphan ticket", "Nobody owns this ticket and it has no team. Helpdesk record.", None, None),
    (5, "Mail quota", "Raise the mailbox quota for the legal team. Helpdesk record.", 103, None),
]
DOCS = [
    (10, "Runbook: VPN", "How to restart the VPN concentrator. Helpdesk record."),
    (11, "Budget", "Next year's budget. Helpdesk record."),
    (12, "Unlisted", "A document nobody is on the ACL of. Helpdesk record."),
]
DOC_ACL = [(10, "net"), (10, "ops"), (11, "finance")]
MEMBERS = [(101, "ops"), (102, "net"), (104, "finance"), (104, "ops")]
ROLES = [(105, "lead")]

SOURCES = {
    "tickets": {
        "query": "SELECT id, subject AS title, body AS content, owner_id, team FROM ticket",
        "owner_column": "owner_id",
        "access": ["owner", "group"],
        "group_column": "team",
    },
    "docs": {
        "query": "SELECT id, title, body AS content FROM doc",
        "access": ["group"],
        "acl_query": "SELECT doc_id, grp FROM doc_acl",
    },
    "notices": {"query": "SELECT id, body AS content FROM notice", "access": "public"},
}


def _exec(rag: RagSystem, *statements: str, **binds: object) -> None:
    with rag.engine.begin() as conn:
        for sql in statements:
            conn.execute(sa.text(sql), binds)


@pytest.fixture
def helpdesk(make_settings) -> Iterator[RagSystem]:
    """A deployment with no EMPLOYEE table: tickets by team, documents by ACL, public notices."""
    rag = RagSystem(
        make_settings(
            sources=SOURCES,
            see_all_roles="lead",
            access_groups_query="SELECT member_id, team FROM team_member",
            access_roles_query="SELECT member_id, role FROM member_role",
        )
    )
    rag.migrate()
    with rag.engine.begin() as conn:
        for ddl in (
            "CREATE TABLE ticket (id INTEGER PRIMARY KEY, subject TEXT, body TEXT, owner_id INTEGER, team TEXT)",
            "CREATE TABLE doc (id INTEGER PRIMARY KEY, title TEXT, body TEXT)",
            "CREATE TABLE doc_acl (doc_id INTEGER, grp TEXT)",
            "CREATE TABLE notice (id INTEGER PRIMARY KEY, body TEXT)",
            "CREATE TABLE team_member (member_id INTEGER, team TEXT)",
            "CREATE TABLE member_role (member_id INTEGER, role TEXT)",
        ):
            conn.exec_driver_sql(ddl)
        conn.execute(
            sa.text("INSERT INTO ticket VALUES (:i, :s, :b, :o, :t)"),
            [dict(zip("isbot", r, strict=True)) for r in TICKETS],
        )
        conn.execute(
            sa.text("INSERT INTO doc VALUES (:i, :t, :b)"), [dict(zip("itb", r, strict=True)) for r in DOCS]
        )
        conn.execute(sa.text("INSERT INTO doc_acl VALUES (:d, :g)"), [{"d": d, "g": g} for d, g in DOC_ACL])
        conn.execute(
            sa.text("INSERT INTO notice VALUES (1, 'The office is closed on Friday. Helpdesk record.')")
        )
        conn.execute(
            sa.text("INSERT INTO team_member VALUES (:m, :t)"), [{"m": m, "t": t} for m, t in MEMBERS]
        )
        conn.execute(sa.text("INSERT INTO member_role VALUES (:m, :r)"), [{"m": m, "r": r} for m, r in ROLES])
    results = rag.sql_sources().sync()
    assert all(r.outcome == "changed" for r in results), [r.summary() for r in results]
    yield rag
    rag.close()


def _caller(rag: RagSystem, employee_id: int) -> Caller:
    with rag.engine.connect() as conn:
        return load_caller(conn, employee_id, rag.engine)


def _visible(
    rag: RagSystem, caller: Caller, mode: str = "keyword", query: str = "helpdesk record"
) -> set[str]:
    hits = rag.retriever().search(query, 100, caller, mode)
    return {h.source_id for h in hits}


def _expected(rag: RagSystem, caller: Caller) -> set[str]:
    """The declared policy in plain Python over the source tables."""
    if caller.sees_all:
        return {f"tickets#{t[0]}" for t in TICKETS} | {f"docs#{d[0]}" for d in DOCS} | {"notices#1"}
    with rag.engine.connect() as conn:
        tickets = conn.execute(sa.text("SELECT id, owner_id, team FROM ticket")).fetchall()
        acl = conn.execute(sa.text("SELECT doc_id, grp FROM doc_acl")).fetchall()
        docs = [r[0] for r in conn.execute(sa.text("SELECT id FROM doc"))]
    out = {"notices#1"}
    out |= {
        f"tickets#{i}" for i, owner, team in tickets if owner == caller.employee_id or team in caller.groups
    }
    out |= {f"docs#{d}" for d in docs if any(a == d and g in caller.groups for a, g in acl)}
    return out


# -- the policy itself ----------------------------------------------------------------------------
def test_record_access_follows_the_declared_rules() -> None:
    assert record_access(OWNER_ONLY, 7) == RecordAccess(owner=7)
    assert record_access(OWNER_ONLY, None) == RecordAccess()  # missing: hidden (fail closed)
    assert record_access(LEGACY, None) == RecordAccess(public=True)  # a source that declares nothing
    assert record_access(PUBLIC, 7, ["a"]) == RecordAccess(public=True)
    both = AccessPolicy(("owner", "group"))
    assert record_access(both, 7, ["b", "a", "a"]) == RecordAccess(owner=7, groups=("a", "b"))
    assert record_access(AccessPolicy(("group",)), 7, ()) == RecordAccess()  # owner not a rule: ignored
    assert record_access(AccessPolicy(("group",), "public"), None, ()) == RecordAccess(public=True)
    with pytest.raises(ConfigurationError, match="unknown rule"):
        AccessPolicy(("owner", "team"))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"access": ["group"]}, "needs group_column or acl_query"),
        ({"access": ["owner"], "group_column": "team"}, "only meaningful"),
        ({"access": ["group"], "group_column": "t", "acl_query": "SELECT 1, 2"}, "not both"),
        ({"access": ["everyone"]}, "unknown rule"),
        ({"access": ["owner"], "missing_access": "maybe"}, "hidden or public"),
        ({"access": ["group"], "acl_query": "DELETE FROM x"}, "SELECT"),
    ],
)
def test_source_access_options_are_validated(options: dict, message: str) -> None:
    with pytest.raises(ConfigurationError, match=message):
        SqlSource("s", "SELECT id, body AS content FROM t", **options)


def test_caller_roles_and_groups() -> None:
    caller = Caller(5, ["dev", "lead"], ["ops", 7, "ops"], see_all_roles=("lead",))
    assert caller.sees_all and caller.groups == ("ops", "7") and caller.role == "dev"
    assert not Caller(5, role="manager", see_all_roles=("admin",)).sees_all
    assert Caller(5, role="manager").sees_all  # the default see-all roles: manager, admin
    assert caller.scope().binds()["access_groups"] == ["ops", "7", "\x00", "\x00"]
    assert len(Caller(5, (), [f"g{i}" for i in range(9)]).scope().binds()["access_groups"]) == 16
    with pytest.raises(AccessError):
        Caller(5, (), ["bad\ngroup"])


# -- every caller sees what the policy allows ------------------------------------------------------
@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid"])
def test_each_caller_sees_exactly_what_the_declared_policy_allows(helpdesk: RagSystem, mode: str) -> None:
    for employee_id in (101, 102, 103, 104, 105, 999):
        caller = _caller(helpdesk, employee_id)
        assert caller.see_all_roles == ("lead",)
        assert _visible(helpdesk, caller, mode) == _expected(helpdesk, caller), employee_id
    assert _caller(helpdesk, 105).sees_all and not _caller(helpdesk, 104).sees_all
    assert _caller(helpdesk, 104).groups == ("finance", "ops")


def test_no_employee_table_any_id_is_a_caller_with_the_declared_data(helpdesk: RagSystem) -> None:
    nobody = _caller(helpdesk, 424242)
    assert (nobody.roles, nobody.groups, nobody.name) == ((), (), "")
    assert _visible(helpdesk, nobody) == {"notices#1"}


def test_a_membership_change_is_visible_on_the_next_refresh_with_no_embedding(helpdesk: RagSystem) -> None:
    directory = directory_for(helpdesk.engine)
    now = [1000.0]
    directory.clock = lambda: now[0]
    directory.refresh(helpdesk.engine.sa_engine, force=True)
    calls = helpdesk.engine.runtime().calls
    _exec(helpdesk, "INSERT INTO team_member VALUES (101, 'net')")
    assert "tickets#2" not in _visible(helpdesk, _caller(helpdesk, 101))  # cached until the refresh
    now[0] += directory.refresh_s
    assert "tickets#2" in _visible(helpdesk, _caller(helpdesk, 101))
    _exec(helpdesk, "DELETE FROM team_member WHERE member_id = 101")
    now[0] += directory.refresh_s
    leaver = _caller(helpdesk, 101)
    assert leaver.groups == () and _visible(helpdesk, leaver) == _expected(helpdesk, leaver)
    assert helpdesk.engine.runtime().calls == calls  # membership is not in the index: nothing embedded


def test_group_and_acl_changes_rescope_without_embedding(helpdesk: RagSystem) -> None:
    ops = _caller(helpdesk, 101)
    assert "docs#11" not in _visible(helpdesk, ops)
    calls = helpdesk.engine.runtime().calls
    _exec(
        helpdesk,
        "UPDATE ticket SET team = 'net' WHERE id = 3",
        "INSERT INTO doc_acl VALUES (11, 'ops')",
        "DELETE FROM doc_acl WHERE doc_id = 10 AND grp = 'ops'",
    )
    results = {r.name: r for r in helpdesk.sql_sources().sync()}
    assert (results["tickets"].rescoped, results["docs"].rescoped) == (1, 2)
    assert results["tickets"].embedded == results["docs"].embedded == 0
    assert helpdesk.engine.runtime().calls == calls
    seen = _visible(helpdesk, ops)
    assert "docs#11" in seen and "docs#10" not in seen and "tickets#3" not in seen
    assert seen == _expected(helpdesk, ops)
    with helpdesk.engine.connect() as conn:
        acl = set(
            conn.execute(sa.text("SELECT SOURCE_ID, PRINCIPAL FROM RAG_CHUNK_ACL WHERE SOURCE_TYPE = 'docs'"))
        )
    assert acl == {("docs#10", "net"), ("docs#11", "finance"), ("docs#11", "ops")}


def test_a_failed_acl_query_hides_the_source_until_it_succeeds(helpdesk: RagSystem, cli) -> None:
    ops, lead = _caller(helpdesk, 101), _caller(helpdesk, 105)
    assert "docs#10" in _visible(helpdesk, ops)
    _exec(helpdesk, "ALTER TABLE doc_acl RENAME TO doc_acl_moved")
    result = {r.name: r for r in helpdesk.sql_sources().sync()}["docs"]
    assert result.outcome == "failed" and "acl_query failed" in str(result.error)
    with helpdesk.engine.connect() as conn:
        assert set(helpdesk.engine.access_failures(conn)) == {"docs"}
    status = cli("status")  # QA D-7: `oracle-rag status` says it in words
    assert status.exit_code == 0 and "WARNING: source 'docs' is hidden" in status.output, status.output
    for mode in ("keyword", "semantic", "hybrid"):
        assert not any(s.startswith("docs#") for s in _visible(helpdesk, ops, mode))
        assert {"docs#10", "docs#11", "docs#12"} <= _visible(helpdesk, lead, mode)  # see-all: unchanged
    _exec(helpdesk, "ALTER TABLE doc_acl_moved RENAME TO doc_acl")
    assert {r.name: r for r in helpdesk.sql_sources().sync()}["docs"].outcome != "failed"
    assert "docs#10" in _visible(helpdesk, ops)
    with helpdesk.engine.connect() as conn:
        assert helpdesk.engine.access_failures(conn) == {}
    assert "WARNING" not in cli("status").output


def test_a_failure_is_cleared_when_the_source_now_reads_its_access_another_way(
    helpdesk: RagSystem, make_settings
) -> None:
    """QA D-0: an acl_query replaced by a group_column must not leave the source hidden for good."""
    ops = _caller(helpdesk, 101)
    _exec(helpdesk, "ALTER TABLE doc_acl RENAME TO doc_acl_moved")
    assert {r.name: r for r in helpdesk.sql_sources().sync()}["docs"].outcome == "failed"
    assert not any(s.startswith("docs#") for s in _visible(helpdesk, ops))
    sources = dict(
        SOURCES,
        docs={
            "query": "SELECT d.id, d.title, d.body AS content, "
            "(SELECT MIN(a.grp) FROM doc_acl_moved a WHERE a.doc_id = d.id) AS grp FROM doc d",
            "access": ["group"],
            "group_column": "grp",
        },
    )
    fixed = RagSystem(
        make_settings(
            sources=sources,
            see_all_roles="lead",
            access_groups_query="SELECT member_id, team FROM team_member",
            access_roles_query="SELECT member_id, role FROM member_role",
        )
    )
    try:
        result = {r.name: r for r in fixed.sql_sources().sync()}["docs"]
        assert result.outcome != "failed", result.summary()
        with fixed.engine.connect() as conn:
            assert fixed.engine.access_failures(conn) == {}
        # doc 10's first group is "net", doc 11's "finance": ops (101) now sees neither; net (102) sees 10.
        assert not any(s.startswith("docs#") for s in _visible(fixed, _caller(fixed, 101)))
        assert {s for s in _visible(fixed, _caller(fixed, 102)) if s.startswith("docs#")} == {"docs#10"}
        assert {s for s in _visible(fixed, _caller(fixed, 104)) if s.startswith("docs#")} == {"docs#11"}
        assert fixed.status()["access_hidden_sources"] == []
    finally:
        fixed.close()


def test_a_failure_of_a_source_removed_from_the_configuration_is_cleared(
    helpdesk: RagSystem, make_settings, cli
) -> None:
    """A failure row of a source that left the configuration was reported by status and /healthz for good."""
    _exec(helpdesk, "ALTER TABLE doc_acl RENAME TO doc_acl_moved")
    assert {r.name: r for r in helpdesk.sql_sources().sync()}["docs"].outcome == "failed"
    without = {k: v for k, v in SOURCES.items() if k != "docs"}
    removed = RagSystem(
        make_settings(
            sources=without,
            see_all_roles="lead",
            access_groups_query="SELECT member_id, team FROM team_member",
            access_roles_query="SELECT member_id, role FROM member_role",
        )
    )
    try:
        refresher = removed.sql_sources()
        # Its records are still indexed: the failure still hides them (fail closed) and is still reported.
        refresher.refresh_due()
        assert removed.status()["access_hidden_sources"] == ["docs"]
        assert not any(s.startswith("docs#") for s in _visible(removed, _caller(removed, 101)))
        # Dropped (the documented step after removing a source): nothing is left to hide, nothing is reported.
        assert refresher.drop("docs") == len(DOCS)
        assert removed.status()["access_hidden_sources"] == []
        status = cli("status")
        assert status.exit_code == 0 and "WARNING" not in status.output, status.output
        # A row left by an older version that dropped without clearing: the periodic refresh clears it.
        with removed.engine.begin() as conn:
            removed.engine.set_access_failure(conn, "docs", "2026-03-01T00:00:00Z", "DATABASE")
            removed.engine.set_access_failure(conn, "tickets", "2026-03-01T00:00:00Z", "DATABASE")
        refresher.refresh_due()
        with removed.engine.connect() as conn:  # tickets is configured: only its next sync clears it
            assert set(removed.engine.access_failures(conn)) == {"tickets"}
    finally:
        removed.close()


def test_a_deployment_without_sql_sources_clears_an_orphan_failure_in_its_background_services(
    make_settings,
) -> None:
    """The last SQL source removed: no refresh thread runs, the hourly upkeep clears a row that hides nothing."""
    from reliability_helpers import wait_until

    from oracle_rag.background import BackgroundServices

    rag = RagSystem(make_settings(worker_initial_delay_ms=0))
    rag.migrate()
    with rag.engine.begin() as conn:
        rag.engine.set_access_failure(conn, "docs", "2026-03-01T00:00:00Z", "DATABASE")
    assert rag.status()["access_hidden_sources"] == ["docs"]
    services = BackgroundServices(rag, worker=True, backfill=False)
    services.start()
    try:
        wait_until(lambda: rag.status()["access_hidden_sources"] == [])
    finally:
        assert services.stop()
        rag.close()


def test_the_group_column_can_also_be_a_facet(helpdesk: RagSystem, make_settings) -> None:
    """QA D-3: `team` as group_column AND facet used to read null on every row ("per team: none")."""
    sources = dict(SOURCES, tickets=dict(SOURCES["tickets"], facet_columns={"team": "enum"}))
    rag = RagSystem(
        make_settings(
            sources=sources,
            see_all_roles="lead",
            access_groups_query="SELECT member_id, team FROM team_member",
            access_roles_query="SELECT member_id, role FROM member_role",
        )
    )

    def facets() -> dict[str, object]:
        with rag.engine.connect() as conn:
            rows = conn.execute(
                sa.text("SELECT SOURCE_ID, FACETS FROM RAG_CHUNK WHERE SOURCE_TYPE = 'tickets'")
            )
            return {str(r[0]): facets_value(r[1]).get("team") for r in rows}

    try:
        assert {r.name: r for r in rag.sql_sources().sync()}["tickets"].outcome == "changed"
        assert facets() == {f"tickets#{t[0]}": t[4] for t in TICKETS}
        for employee_id in (101, 102, 103, 104, 105):
            caller = _caller(rag, employee_id)
            assert _visible(rag, caller) == _expected(rag, caller), employee_id
        _exec(rag, "UPDATE ticket SET team = 'net' WHERE id = 3")
        result = {r.name: r for r in rag.sql_sources().sync()}["tickets"]
        assert result.updated == 1  # the facet changed: the chunk is rewritten, with its new access
        assert facets()["tickets#3"] == "net"
        assert "tickets#3" in _visible(rag, _caller(rag, 102)) and "tickets#3" not in _visible(
            rag, _caller(rag, 101)
        )
    finally:
        rag.close()


def test_a_failed_groups_query_fails_closed(make_settings) -> None:
    rag = RagSystem(make_settings(access_groups_query="SELECT member_id, team FROM no_such_table"))
    rag.migrate()
    try:
        directory = CallerDirectory(rag.settings)
        with rag.engine.connect() as conn:
            caller = directory.load(conn, 7)
        assert caller.groups == () and directory.state.failures == 1
        assert "groups_query" in (directory.state.last_error or "")
    finally:
        rag.close()


def test_reference_app_callers_keep_their_employee_role(demo_rag: RagSystem) -> None:
    with demo_rag.engine.connect() as conn:
        manager = load_caller(conn, 3, demo_rag.engine)
        with pytest.raises(NotFoundError):
            load_caller(conn, 99999, demo_rag.engine)
    assert manager.roles == ("manager",) and manager.sees_all and manager.name


def test_ask_as_works_without_an_employee_table(cli, tmp_path) -> None:
    """`oracle-rag ask ... --as 1` used to fail with 'sqlite connection failed' (EMPLOYEE missing)."""
    assert cli("migrate").exit_code == 0
    result = cli("ask", "what is closed on friday?", "--as", "1")
    assert result.exit_code == 0, result.output
    assert "sqlite connection failed" not in result.output
