"""The access property at every entry point: the real servers and the guarded views obey the declared policy.

The same world and the same plain Python model as tests/test_access_property.py
(tests/access_property_helpers.py: policies per source, owners and groups per
record, failed permission data), but the callers are a deployment's: ids with roles and groups in tables read
by the declared ``[access] roles_query`` / ``groups_query`` (no EMPLOYEE
table), reached through API tokens; and again with callers from JWTs of an identity provider made in the
test, their roles and groups in the token's claims (``[auth] prefer = "token"``). Per example, through:

* the Flask app served by waitress on 127.0.0.1, over HTTP: the record
  detail ``/api/chunks/<type>/<id>`` (200 exactly for the allowed records,
  the same 404 body otherwise), ``/api/chat`` structured counts ("how many
  widgets are there?", the types declared with nouns: exactly), and
  ``/api/chat`` answers (every cited record allowed);
* ``/v1/chat/completions`` through the ``openai`` SDK, read from the
  response's ``oracle_rag.structured`` (the computed result, no prose
  parsed): the count per type and over all types exactly, a lookup of every
  record of a type by id as a set, and a free answer's citations allowed;
* the MCP server (streamable HTTP on uvicorn, the SDK's own client, bearer
  tokens): ``search`` (exactly the allowed set), ``get_record`` (found
  exactly for the allowed records) and ``ask`` (every cited record allowed);
* the guarded aggregate path (``AggregateService.run_sql``, the ``oracle-rag
  sql`` path) over views ``RAG_V_<TYPE>`` whose scope is the generated
  ``{{RAG_RECORD_VISIBLE:...}}`` predicate, as the demo migration's:
  ``COUNT(*)`` exactly, the ids as a set.

Servers start once per module; few examples (each one re-scopes the records
with no embedding and reloads the declared roles and groups).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from types import SimpleNamespace

import anyio
import openai
import pytest
import sqlalchemy as sa
from access_property_helpers import (
    GROUPS,
    RECORDS,
    TYPES,
    WORDS,
    allowed,
    apply_access,
    policies,
    record_data,
    write_synthetic_records,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jwt_helpers import NOW, Clock, Provider, auth_settings, jwks_server
from model_helpers import link_model
from reliability_helpers import http_request
from test_mcp import http_client, uvicorn_app

from oracle_rag.answering.aggregate import AggregateService
from oracle_rag.answering.aggregate.catalog import Catalog, Column, View
from oracle_rag.answering.chat import Chat
from oracle_rag.callers.access import directory_for, load_caller
from oracle_rag.callers.caller import Caller
from oracle_rag.callers.identity import identity_for
from oracle_rag.callers.tokens import create_token
from oracle_rag.config import load_settings
from oracle_rag.integrations.mcp_server import http_app
from oracle_rag.sources.base import Document, Source
from oracle_rag.sources.meanings import Meanings
from oracle_rag.system import RagSystem
from oracle_rag.web import create_app
from oracle_rag.web.openai_api import MODEL_ID
from oracle_rag.web.server import make_server, serve_until

IDS = (1, 2, 3, 4, 5, 6)
EXAMPLES = settings(max_examples=6, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
CATALOG = Catalog(
    tuple(
        View(
            f"RAG_V_{t}", f"{t.lower()} records the caller may see", (Column("ID", "INTEGER", "primary key"),)
        )
        for t in TYPES
    )
)
QUESTION = "zebra record"
NOUNS = {"ALPHA": ("widget", "widgets"), "BETA": ("gadget", "gadgets"), "GAMMA": ("gizmo", "gizmos")}


class _Declared(Source):
    """A record type the question understanding knows by its nouns ("how many widgets"), rows in its table."""

    def __init__(self, source_type: str) -> None:
        self.SOURCE_TYPE = source_type
        self.meanings = Meanings(nouns={"en": NOUNS[source_type]})

    def _text(self, i: str) -> str:
        return f"[{self.SOURCE_TYPE} #{i}] zebra {WORDS[int(i) % len(WORDS)]} record {self.SOURCE_TYPE.lower()} {i}"

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        rows = conn.execute(
            sa.text(f"SELECT ID FROM {self.SOURCE_TYPE} WHERE ID IN :ids").bindparams(
                sa.bindparam("ids", expanding=True)
            ),
            {"ids": [int(i) for i in ids]},
        )
        return {str(r[0]): Document(self.SOURCE_TYPE, str(r[0]), self._text(str(r[0]))) for r in rows}

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return [str(r[0]) for r in conn.execute(sa.text(f"SELECT ID FROM {self.SOURCE_TYPE}"))]


def _create_views(rag: RagSystem) -> None:
    """Tables with the records' ids and guarded views over them, scoped by the generated predicate."""
    script = "".join(
        f"CREATE TABLE {t} (ID INTEGER PRIMARY KEY);\n"
        f"CREATE VIEW RAG_V_{t} AS SELECT x.ID FROM {t} x WHERE {{{{RAG_RECORD_VISIBLE:{t}:x.ID}}}};\n"
        for t in TYPES
    )
    with rag.engine.begin() as conn:
        for statement in rag.engine.split_script(rag.engine.render_migration(script)):
            conn.exec_driver_sql(statement)
        for t in TYPES:
            conn.execute(
                sa.text(f"INSERT INTO {t} (ID) VALUES (:id)"),
                [{"id": int(i)} for tt, i in RECORDS if tt == t],
            )


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, model_path) -> Iterator[SimpleNamespace]:
    data = tmp_path_factory.mktemp("access-servers")
    link_model(model_path, data)
    provider = Provider()
    provider.add_ec("ec-1")
    stack = ExitStack()  # the provider's key set is served for the module
    jwks_url = stack.enter_context(jwks_server(provider)).url
    rag = RagSystem(
        load_settings(
            env={},
            data_dir=str(data),
            see_all_roles="lead",
            access_roles_query="SELECT member_id, role FROM member_role",
            access_groups_query="SELECT member_id, grp FROM member_group",
            **auth_settings(
                jwks_url, auth_roles_claim="roles", auth_groups_claim="groups", auth_prefer="TOKEN"
            ),
        ),
        sources=[_Declared(t) for t in TYPES],
    )
    identity = identity_for(rag.engine)
    assert identity is not None
    identity.clock = Clock(NOW)
    rag.migrate()
    with rag.engine.begin() as conn:
        write_synthetic_records(rag, conn)
        conn.exec_driver_sql("CREATE TABLE member_role (member_id INTEGER, role TEXT)")
        conn.exec_driver_sql("CREATE TABLE member_group (member_id INTEGER, grp TEXT)")
    _create_views(rag)
    tokens = {i: create_token(rag.engine, i, check_employee=False).token for i in IDS}
    server = make_server(
        create_app({"ORACLE_RAG_SYSTEM": rag, "ORACLE_RAG_LLM": None}), "127.0.0.1", 0, threads=4
    )
    stop = threading.Event()
    thread = threading.Thread(target=serve_until, args=(server, stop), daemon=True)
    thread.start()
    try:
        with uvicorn_app(http_app(rag, chat=Chat(rag, None))) as mcp_url:
            yield SimpleNamespace(
                rag=rag,
                tokens=tokens,
                api=f"127.0.0.1:{server.effective_port}",
                mcp=mcp_url,
                aggregates=AggregateService(rag.engine, rag.settings, CATALOG),
                provider=provider,
                identity=identity,
            )
    finally:
        stop.set()
        thread.join(60)
        rag.close()
        stack.close()


def _declare_members(rag: RagSystem, members: dict[int, tuple[frozenset[str], frozenset[str]]]) -> None:
    """The deployment's roles and groups tables, then a forced refresh of the declared queries."""
    with rag.engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM member_role")
        conn.exec_driver_sql("DELETE FROM member_group")
        for member, (roles, groups) in members.items():
            for role in sorted(roles):
                conn.execute(sa.text("INSERT INTO member_role VALUES (:m, :r)"), {"m": member, "r": role})
            for group in sorted(groups):
                conn.execute(sa.text("INSERT INTO member_group VALUES (:m, :g)"), {"m": member, "g": group})
    directory_for(rag.engine).refresh(rag.engine.sa_engine, force=True)


def _cited(body: dict) -> set[tuple[str, str]]:
    return {(c["source_type"], c["source_id"]) for c in body.get("citations") or ()}


def _check_http(world: SimpleNamespace, token: str, member: int, want: set[tuple[str, str]]) -> None:
    headers = {"Authorization": f"Bearer {token}"}

    def call(method: str, path: str, body: dict | None = None):  # noqa: ANN202
        return http_request(world.api, method, path, body, headers=headers)

    missing = call("GET", "/api/chunks/ALPHA/999")
    assert missing.status == 404
    for key in RECORDS:
        got = call("GET", f"/api/chunks/{key[0]}/{key[1]}")
        if key in want:
            assert got.status == 200 and got.json()["source_id"] == key[1], (member, key)
        else:
            assert (got.status, got.json()) == (404, missing.json()), (member, key)
    for t in TYPES:  # a structured count: exactly
        counted = call("POST", "/api/chat", {"question": f"how many {NOUNS[t][1]} are there?"}).json()
        assert counted["route"] == "structured" and counted["structured"]["type"] == t, counted
        assert counted["structured"]["count"] == len([k for k in want if k[0] == t]), (member, t)
    chat = call("POST", "/api/chat", {"question": QUESTION})
    assert chat.status == 200, chat.text
    assert _cited(chat.json()) <= want, member


def _check_v1(world: SimpleNamespace, token: str, member: int, want: set[tuple[str, str]]) -> None:
    """``/v1/chat/completions`` through the ``openai`` SDK: the computed result in ``oracle_rag.structured``."""
    client = openai.OpenAI(base_url=f"http://{world.api}/v1", api_key=token, max_retries=0, timeout=60)

    def ask(question: str) -> tuple[dict, dict | None]:
        completion = client.chat.completions.create(
            model=MODEL_ID, messages=[{"role": "user", "content": question}]
        )
        extra = completion.model_extra or {}
        return extra, extra["oracle_rag"]["structured"]

    for t in TYPES:
        ids = {i for tt, i in want if tt == t}
        _extra, counted = ask(f"how many {NOUNS[t][1]} are there?")  # a count: exactly
        assert counted is not None and (counted["kind"], counted["type"]) == ("count", t), counted
        assert counted["count"] == len(ids), (member, t)
        # every record of the type by id: a lookup lists exactly the ones the caller may see (as a set)
        named = ", ".join(f"{NOUNS[t][0]} {i}" for tt, i in RECORDS if tt == t)
        _extra, listed = ask(named)
        assert listed is not None and listed["kind"] == "lookup", listed
        assert {(r["source_type"], r["source_id"]) for r in listed["records"]} == {(t, i) for i in ids}, (
            member,
            t,
        )
    _extra, every = ask("how many " + ", ".join(NOUNS[t][1] for t in TYPES) + " are there?")
    assert every is not None and every["count"] == len(want), member
    assert {(x["type"], x["total"]) for x in every["types"]} == {
        (t, len([k for k in want if k[0] == t])) for t in TYPES
    }, member
    extra, _ = ask(QUESTION)  # a free answer cites its top records only: within the allowed set
    assert {(c["source_type"], c["source_id"]) for c in extra["citations"]} <= want, member


async def _check_mcp(world: SimpleNamespace, token: str, member: int, want: set[tuple[str, str]]) -> None:
    async with http_client(world.mcp, token) as client:
        found = await client.call_tool("search", {"query": QUESTION, "mode": "keyword", "k": 100})
        assert not found.is_error
        assert {(h["source_type"], h["source_id"]) for h in found.structured_content["hits"]} == want, member
        for key in RECORDS:
            got = await client.call_tool("get_record", {"type": key[0], "id": key[1]})
            assert got.is_error is (key not in want), (member, key)
        asked = await client.call_tool("ask", {"question": QUESTION})
        assert not asked.is_error and _cited(asked.structured_content) <= want, member


def _check_aggregates(world: SimpleNamespace, caller: Caller, want: set[tuple[str, str]]) -> None:
    member = caller.employee_id
    for t in TYPES:
        expected = {i for tt, i in want if tt == t}
        counted = world.aggregates.run_sql(f"SELECT COUNT(*) AS N FROM RAG_V_{t}", caller)
        assert counted.rows == [[len(expected)]], (member, t)
        listed = world.aggregates.run_sql(f"SELECT ID FROM RAG_V_{t}", caller)
        assert {str(r[0]) for r in listed.rows} == expected, (member, t)


members = st.dictionaries(
    st.sampled_from(IDS),
    st.tuples(
        st.frozensets(st.sampled_from(("dev", "lead", "ops")), max_size=2),
        st.frozensets(st.sampled_from(GROUPS), max_size=3),
    ),
    min_size=1,
    max_size=3,
)


@EXAMPLES
@given(
    pols=st.fixed_dictionaries({t: policies for t in TYPES}),
    data=st.fixed_dictionaries({k: record_data for k in RECORDS}),
    failed=st.frozensets(st.sampled_from(TYPES), max_size=2),
    who=members,
)
def test_servers_and_views_return_exactly_what_the_policy_allows(
    world: SimpleNamespace, pols, data, failed, who
) -> None:
    rag = world.rag
    apply_access(rag, pols, data, set(failed))
    _declare_members(rag, who)
    for member in who:
        with rag.engine.connect() as conn:
            caller = load_caller(conn, member, rag.engine)
        assert set(caller.roles) == set(who[member][0]) and set(caller.groups) == set(who[member][1])
        want = {k for k in RECORDS if allowed(pols[k[0]], *data[k], k[0] in failed, caller)}
        token = world.tokens[member]
        _check_http(world, token, member, want)
        _check_v1(world, token, member, want)
        anyio.run(_check_mcp, world, token, member, want)
        _check_aggregates(world, caller, want)


@EXAMPLES
@given(
    pols=st.fixed_dictionaries({t: policies for t in TYPES}),
    data=st.fixed_dictionaries({k: record_data for k in RECORDS}),
    failed=st.frozensets(st.sampled_from(TYPES), max_size=2),
    who=members,
)
def test_the_same_for_callers_from_jwt_claims(world: SimpleNamespace, pols, data, failed, who) -> None:
    """Callers from the identity provider: roles and groups in the JWT's claims (``[auth] prefer = token``).

    The declared [access] tables are emptied, so a caller reads what the claims grant or the
    test fails; each caller's scope is the one built from the verified token.
    """
    rag = world.rag
    apply_access(rag, pols, data, set(failed))
    _declare_members(rag, {})
    for member in who:
        roles, groups = who[member]
        token = world.provider.mint("ec-1", sub=str(member), roles=sorted(roles), groups=sorted(groups))
        with rag.engine.connect() as conn:
            caller = world.identity.caller(conn, rag.engine, token)
        assert (set(caller.roles), set(caller.groups)) == (set(roles), set(groups))
        want = {k for k in RECORDS if allowed(pols[k[0]], *data[k], k[0] in failed, caller)}
        _check_http(world, token, member, want)
        _check_v1(world, token, member, want)
        anyio.run(_check_mcp, world, token, member, want)
        _check_aggregates(world, caller, want)


def test_the_caller_functions_are_refused_outside_the_views(world: SimpleNamespace) -> None:
    """The guarded connection's caller functions are refused outside a view's body (they set nothing)."""
    from oracle_rag.errors import GuardrailError

    with world.rag.engine.connect() as conn:
        caller = load_caller(conn, 1, world.rag.engine)
    service = AggregateService(world.rag.engine, world.rag.settings, CATALOG)
    service.text_check = False  # the database alone decides
    for call in ("rag_caller_see_all()", "rag_caller_groups()", "rag_caller_id()"):
        with pytest.raises(GuardrailError, match="outside the views"):
            service.run_sql(f"SELECT {call} FROM RAG_V_ALPHA", caller)
