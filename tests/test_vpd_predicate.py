"""One predicate everywhere: the VPD policies return the scope generator's text, and it agrees.

Oracle cannot run here. What runs (no skip):

* the package body is decoded back from its PL/SQL text (every ``RETURN
  '...' || '...'`` of each policy function) and each branch is exactly what
  ``scope_predicate`` / ``acl_predicate`` make for that policy
  with the caller read from the context or from the guarded session's row:
  the package restates nothing by hand;
* the decoded text is evaluated on SQLite, on a real migrated database, over
  random access data (hypothesis: owners, groups, public rows, failed
  sources, callers): ``SYS_CONTEXT`` and ``TO_NUMBER`` are SQLite functions
  registered on the connection that answer what ``SET_CALLER`` (the values
  the hook computes, ``oracle_vpd.context_call``) or the guarded session's
  ``CLIENT_IDENTIFIER`` would; the only text replaced is Oracle's
  ``JSON_TABLE`` over the groups, by SQLite's ``json_each`` over the same
  context value. The rows each policy lets through equal what the bind form
  (``engine_sql.SCOPE``, every read statement's predicate) returns for the
  same caller: chunks and postings as sets, ACL rows as sets; see-all and
  system sessions get no predicate (the package's NULL), a session with no
  context and no guarded row gets nothing.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oracle_rag.engines import ChunkWrite, RecordAccess, Scope, content_hash, engine_sql
from oracle_rag.engines.guarded_scope_sql import caller_known, guarded_caller
from oracle_rag.engines.oracle import vpd_sql as vpd
from oracle_rag.engines.oracle.vpd import context_call
from oracle_rag.engines.scope_sql import (
    BINDS,
    GROUP_TESTS,
    acl_predicate,
    scope_join,
    scope_predicate,
)
from oracle_rag.text.bm25 import analyze_record

TYPES = ("DOC", "NOTE")
IDS = [(t, str(i)) for t in TYPES for i in range(1, 7)]
GROUPS = ("ops", "net", "fin", "o'hara")  # a quote in a group name: the JSON and the SQL keep it data
TOKEN = "f" * 32
_RETURN = re.compile(r"RETURN ((?:'(?:[^']|'')*'\s*(?:\|\|\s*)?)+);")
_LITERAL = re.compile(r"'((?:[^']|'')*)'")


def package_returns(function: str) -> list[str]:
    """The predicate texts the policy function ``function`` returns, decoded from the package body."""
    body = vpd.CREATE_PACKAGE_BODY.oracle
    start = body.index(f"FUNCTION {function}(")
    block = body[start : body.index(f"END {function};", start)]
    assert "RETURN NULL;" in block and block.index("IF UNRESTRICTED THEN") < block.index("RETURN NULL;")
    return [
        "".join(piece.replace("''", "'") for piece in _LITERAL.findall(m.group(1)))
        for m in _RETURN.finditer(block)
    ]


def test_each_policy_function_returns_the_generators_text() -> None:
    context, guarded = vpd.CONTEXT_CALLER, guarded_caller("oracle")
    known = caller_known("oracle")
    expected = {
        "CHUNK_PREDICATE": [
            f"{known} AND {scope_predicate('', guarded, group_test='records')}",
            scope_predicate("", context, group_test="records"),
        ],
        "ACL_PREDICATE": [f"{known} AND {acl_predicate(guarded)}", acl_predicate(context)],
        "TERM_PREDICATE": ["1 = 0", scope_predicate("", context, group_test="chunks")],
    }
    for function, texts in expected.items():
        assert package_returns(function) == texts, function
    # The postings' predicate is SCOPE itself with the row unqualified and the binds read from the context.
    scope = re.sub(r"(?<![\w.])c\.", "", engine_sql.SCOPE)
    for bind, read in zip(BINDS, context, strict=True):
        scope = scope.replace(bind, read)
    assert package_returns("TERM_PREDICATE")[1] == scope


def test_no_policy_reads_its_own_table_and_each_fits_a_predicate() -> None:
    """A predicate that reads its own table is a circular policy (DIA-28108); 4000 bytes: the short form."""
    own = {
        "CHUNK_PREDICATE": r"\bRAG_CHUNK\b(?!_)",
        "ACL_PREDICATE": r"\bRAG_CHUNK_ACL\b",
        "TERM_PREDICATE": r"\bRAG_CHUNK_TERM\b",
    }
    for function, table in own.items():
        for text in package_returns(function):
            assert not re.search(table, text), (function, text)
            assert len(text.encode()) < 4000
    # the groups come from the package's session state (any length), not a 4 KB context value
    assert "JSON_TABLE(RAG_ACCESS_CTX_PKG.CALLER_GROUPS, '$[*]'" in package_returns("CHUNK_PREDICATE")[1]
    assert "'GROUPS'" not in vpd.CREATE_PACKAGE_BODY.oracle


def _sqlite_form(text: str) -> str:
    """Oracle's JSON_TABLE over the context's groups, as SQLite's json_each over the same value."""
    oracle_groups = vpd.CONTEXT_CALLER.groups
    assert text.count(oracle_groups) <= 1
    return text.replace(oracle_groups, "(SELECT value FROM json_each(CALLER_GROUPS()))")


class Session:
    """What SYS_CONTEXT answers on one connection: the application context and CLIENT_IDENTIFIER."""

    def __init__(self) -> None:
        self.context: dict[str, str] = {}
        self.groups = "[]"  # the package variable SET_CALLER fills (not a context value)
        self.client_identifier: str | None = None

    def sys_context(self, namespace: str, attribute: str, length: int = 256) -> str | None:
        if namespace == "USERENV":
            assert attribute == "CLIENT_IDENTIFIER"
            return self.client_identifier
        assert namespace == "RAG_ACCESS_CTX" and attribute in ("SYSTEM", "CALLER_ID", "SEE_ALL")
        return self.context.get(attribute)

    def caller_groups(
        self,
    ) -> str:  # the package's CALLER_GROUPS: the array SET_CALLER kept, '[]' without a caller
        return self.groups if self.context.get("CALLER_ID") is not None else "[]"

    def unrestricted(self) -> bool:  # the package's UNRESTRICTED, read from the same context
        return self.context.get("SYSTEM") == "1" or (
            self.context.get("CALLER_ID") is not None and self.context.get("SEE_ALL") == "1"
        )


def _policy_rows(conn: sa.Connection, session: Session, function: str, select: str) -> set[tuple]:
    """The rows ``select`` (no WHERE) returns under the policy function's predicate for this session."""
    if session.unrestricted():
        return {tuple(r) for r in conn.exec_driver_sql(select)}
    guarded, caller = package_returns(function)
    text = guarded if session.context.get("CALLER_ID") is None else caller
    return {tuple(r) for r in conn.exec_driver_sql(f"{select} WHERE {_sqlite_form(text)}")}


def _bind_rows(conn: sa.Connection, scope: Scope) -> set[int]:
    statement = sa.text(f"SELECT c.CHUNK_ID FROM RAG_CHUNK c WHERE {engine_sql.SCOPE}").bindparams(
        sa.bindparam("access_groups", expanding=True)
    )
    return {int(r[0]) for r in conn.execute(statement, scope.binds())}


def _register(conn: sa.Connection, session: Session) -> None:
    raw = conn.connection.driver_connection
    raw.create_function("SYS_CONTEXT", -1, session.sys_context)
    raw.create_function("CALLER_GROUPS", 0, session.caller_groups)
    raw.create_function("TO_NUMBER", 1, lambda v: None if v is None else int(v))
    conn.exec_driver_sql(
        "CREATE TEMP TABLE RAG_GUARDED_CALLER (TOKEN TEXT PRIMARY KEY, CALLER_ID INTEGER, SEE_ALL INTEGER)"
    )
    conn.exec_driver_sql("CREATE TEMP TABLE RAG_GUARDED_GROUP (TOKEN TEXT, PRINCIPAL TEXT)")


access = st.builds(
    RecordAccess,
    owner=st.one_of(st.none(), st.integers(1, 4)),
    groups=st.frozensets(st.sampled_from(GROUPS), max_size=3).map(lambda g: tuple(sorted(g))),
    public=st.booleans(),
)
scopes = st.builds(
    lambda i, see_all, groups: Scope(i, see_all, tuple(sorted(groups))),
    st.integers(1, 5),
    st.booleans(),
    st.frozensets(st.sampled_from(GROUPS + ("none",)), max_size=3),
)


def test_the_vpd_predicates_let_through_what_the_bind_form_does(rag: Any) -> None:
    engine = rag.engine
    with engine.begin() as conn:
        engine.upsert_chunks(
            conn,
            [
                ChunkWrite(
                    t,
                    i,
                    f"alpha {t.lower()} {i}",
                    content_hash(f"{t}{i}"),
                    analysis=analyze_record(f"alpha {t.lower()} {i}"),
                )
                for t, i in IDS
            ],
        )
    session = Session()
    with engine.connect() as conn:
        _register(conn, session)
        conn.commit()
        check(conn, engine, session)


def check(conn: sa.Connection, engine: Any, session: Session) -> None:
    everything = {int(r[0]) for r in conn.exec_driver_sql("SELECT CHUNK_ID FROM RAG_CHUNK")}
    postings = {int(r[0]) for r in conn.exec_driver_sql("SELECT DISTINCT CHUNK_ID FROM RAG_CHUNK_TERM")}
    assert len(everything) == len(IDS) and postings == everything

    @settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
    @given(
        data=st.fixed_dictionaries({k: access for k in IDS}),
        failed=st.frozensets(st.sampled_from(TYPES)),
        callers=st.lists(scopes, min_size=1, max_size=3),
    )
    def example(
        data: dict[tuple[str, str], RecordAccess], failed: frozenset[str], callers: list[Scope]
    ) -> None:
        engine.write_access(conn, [(t, i, a) for (t, i), a in data.items()])
        for t in TYPES:
            engine.set_access_failure(conn, t, "2026-03-01T00:00:00Z" if t in failed else None)
        acl = {
            tuple(r)
            for r in conn.exec_driver_sql("SELECT PRINCIPAL, SOURCE_TYPE, SOURCE_ID FROM RAG_CHUNK_ACL")
        }
        for scope in callers:
            want = _bind_rows(conn, scope)
            want_acl = acl if scope.see_all else {a for a in acl if a[0] in scope.groups}
            call = context_call(scope.binds())  # what the hook passes to SET_CALLER
            assert call is not None
            binds = call[1]
            # The guarded session's row for the same caller (what the product writes for the read-only user).
            conn.exec_driver_sql("DELETE FROM RAG_GUARDED_CALLER")
            conn.exec_driver_sql("DELETE FROM RAG_GUARDED_GROUP")
            conn.execute(
                sa.text("INSERT INTO RAG_GUARDED_CALLER VALUES (:t, :c, :s)"),
                {"t": TOKEN, "c": scope.caller_id, "s": 1 if scope.see_all else 0},
            )
            for g in json.loads(binds["groups"]):
                conn.execute(sa.text("INSERT INTO RAG_GUARDED_GROUP VALUES (:t, :g)"), {"t": TOKEN, "g": g})
            for guarded in (False, True):
                if guarded:  # no context, CLIENT_IDENTIFIER = the token
                    session.context, session.client_identifier = {}, TOKEN
                else:  # SET_CALLER's context: the id, see-all as '1'/'0', the groups as the JSON array
                    session.context = {
                        "CALLER_ID": str(binds["caller_id"]),
                        "SEE_ALL": "1" if binds["see_all"] == 1 else "0",
                    }
                    session.groups = binds["groups"]
                    session.client_identifier = None
                chunks = {
                    r[0]
                    for r in _policy_rows(conn, session, "CHUNK_PREDICATE", "SELECT CHUNK_ID FROM RAG_CHUNK")
                }
                assert chunks == want, (scope, guarded)
                acl_rows = _policy_rows(
                    conn,
                    session,
                    "ACL_PREDICATE",
                    "SELECT PRINCIPAL, SOURCE_TYPE, SOURCE_ID FROM RAG_CHUNK_ACL",
                )
                assert acl_rows == want_acl, (scope, guarded)
                terms = {
                    r[0]
                    for r in _policy_rows(
                        conn, session, "TERM_PREDICATE", "SELECT DISTINCT CHUNK_ID FROM RAG_CHUNK_TERM"
                    )
                }
                assert terms == (set() if guarded else postings & want), (scope, guarded)
        # No context and no guarded row: nothing. The product's own sessions (SET_SYSTEM): everything.
        session.context, session.client_identifier = {}, None
        for function, select in (
            ("CHUNK_PREDICATE", "SELECT CHUNK_ID FROM RAG_CHUNK"),
            ("ACL_PREDICATE", "SELECT PRINCIPAL FROM RAG_CHUNK_ACL"),
            ("TERM_PREDICATE", "SELECT CHUNK_ID FROM RAG_CHUNK_TERM"),
        ):
            assert _policy_rows(conn, session, function, select) == set(), function
        session.context = {"SYSTEM": "1"}
        assert {
            r[0] for r in _policy_rows(conn, session, "CHUNK_PREDICATE", "SELECT CHUNK_ID FROM RAG_CHUNK")
        } == everything

    example()


@pytest.mark.parametrize("group_test", GROUP_TESTS)
def test_every_group_test_is_the_same_rule_on_the_scope_binds(rag: Any, group_test: str) -> None:
    """The forms of the group test, over a named row, select the same chunks as SCOPE (the joined one with its joins)."""
    engine = rag.engine
    with engine.begin() as conn:
        engine.upsert_chunks(conn, [ChunkWrite(t, i, f"beta {i}", content_hash(f"b{t}{i}")) for t, i in IDS])
        engine.write_access(
            conn,
            [(t, i, RecordAccess(owner=int(i) % 3 or None, groups=(GROUPS[int(i) % 4],))) for t, i in IDS],
        )
    joins = scope_join("c") if group_test == "joined" else ""
    form = sa.text(
        f"SELECT c.CHUNK_ID FROM RAG_CHUNK c {joins} WHERE " + scope_predicate("c", group_test=group_test)
    ).bindparams(sa.bindparam("access_groups", expanding=True))
    with engine.connect() as conn:
        for scope in (
            Scope(1, False),
            Scope(2, False, ("ops", "fin")),
            Scope(4, False, ("o'hara",)),
            Scope(4, True),
        ):
            assert {int(r[0]) for r in conn.execute(form, scope.binds())} == _bind_rows(conn, scope), scope
    with pytest.raises(ValueError):
        scope_predicate("", group_test="probe")
    with pytest.raises(ValueError):
        scope_predicate("", group_test="joined")
    with pytest.raises(ValueError):
        scope_predicate("c", group_test="nested")
