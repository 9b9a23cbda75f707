"""Callers from the host's identity provider: Bearer JWTs checked against its key set.

Real parts: keys generated here, the provider's key set served over HTTP on
127.0.0.1 (tests/jwt_helpers.py), PyJWT, the embedded engine on a SQLite file
with a deployment's own tables (no reference application: members, their
roles and groups, the provider's subjects), the Flask app on waitress, the
``openai`` SDK and the MCP SDK's client over HTTP. Time is injected: the
verifier's clock for exp/nbf and the key set's clock for its cache; nothing
sleeps.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator
from types import SimpleNamespace

import anyio
import httpx2
import jwt as pyjwt
import openai
import pytest
from access_property_helpers import RECORDS
from jwt_helpers import (
    AUDIENCE,
    ISSUER,
    MEMBER_TWO_SEES,
    NOW,
    Clock,
    Provider,
    auth_settings,
    deployment_tables,
    jwks_server,
    scoped_records,
)
from mcp.shared.exceptions import MCPError
from reliability_helpers import http_request
from test_mcp import http_client, uvicorn_app

from oracle_rag.answering.chat import Chat
from oracle_rag.callers.identity import JwtIdentity, KeySet, identity_for, identity_status
from oracle_rag.callers.tokens import create_token
from oracle_rag.config import load_settings
from oracle_rag.errors import ConfigurationError, InvalidTokenError
from oracle_rag.integrations.mcp_server import MCP_PATH, StdioIdentity, http_app
from oracle_rag.system import RagSystem
from oracle_rag.web import create_app
from oracle_rag.web.openai_api import MODEL_ID
from oracle_rag.web.server import make_server, serve_until


@pytest.fixture(scope="module")
def provider() -> Provider:
    p = Provider()
    p.add_rsa("rsa-1")
    p.add_ec("ec-1")
    p.add_rsa("rsa-2", publish=False)  # the next key, published when the test rotates
    return p


@pytest.fixture
def idp(provider: Provider) -> Iterator[SimpleNamespace]:
    provider.published = ["rsa-1", "ec-1"]
    with jwks_server(provider) as server:
        yield SimpleNamespace(provider=provider, server=server)


def _deployment(make_settings, idp: SimpleNamespace, **auth: str) -> RagSystem:
    settings = make_settings(
        see_all_roles="lead",
        access_roles_query="SELECT member_id, role FROM member_role",
        access_groups_query="SELECT member_id, grp FROM member_group",
        people_query="SELECT member_id, name FROM member",
        **auth_settings(idp.server.url, **auth),
    )
    rag = RagSystem(settings, sources=[])
    rag.migrate()
    deployment_tables(rag)
    return rag


@pytest.fixture
def site(make_settings, idp: SimpleNamespace) -> Iterator[SimpleNamespace]:
    """The deployment with the provider declared; the verifier's clocks are the test's."""
    rag = _deployment(make_settings, idp)
    identity = identity_for(rag.engine)
    assert identity is not None
    identity.clock = Clock(NOW)
    identity.keys.clock = Clock(0.0)
    yield SimpleNamespace(rag=rag, identity=identity, **vars(idp))
    rag.close()


def caller_of(site: SimpleNamespace, token: str):
    with site.rag.engine.connect() as conn:
        return site.identity.caller(conn, site.rag.engine, token)


def refused(site: SimpleNamespace, token: str, reason: str) -> None:
    with pytest.raises(InvalidTokenError, match=reason):
        caller_of(site, token)


# -- the token ---------------------------------------------------------------------------
def test_a_valid_token_is_its_caller_with_the_declared_roles_groups_and_name(site) -> None:
    for kid in ("rsa-1", "ec-1"):  # RS256 and ES256, the default allow-list
        caller = caller_of(site, site.provider.mint(kid, sub="2"))
        assert (caller.employee_id, caller.roles, caller.groups, caller.name) == (
            2,
            ("dev",),
            ("g1",),
            "Bo Dev",
        )
        assert not caller.sees_all
    lead = caller_of(site, site.provider.mint("rsa-1", sub="1"))
    refused(site, site.provider.mint("rsa-1", sub=1), "InvalidSubjectError")  # sub is text (RFC 7519)
    assert lead.sees_all and lead.name == "Ada Lead"
    assert site.server.hits == 1  # the key set was read once and kept


def test_exp_and_nbf_are_checked_on_the_injected_clock_within_the_leeway(site) -> None:
    clock = site.identity.clock
    token = site.provider.mint("rsa-1", sub="3", lifetime=600)
    clock.now = NOW + 600 + 59  # past exp, inside the 60 s leeway
    assert caller_of(site, token).employee_id == 3
    clock.now = NOW + 600 + 60
    refused(site, token, "expired")
    later = site.provider.mint("rsa-1", sub="3", nbf=int(NOW + 100))
    clock.now = NOW + 39  # nbf is 61 s ahead: more than the leeway
    refused(site, later, "not valid yet")
    clock.now = NOW + 40
    assert caller_of(site, later).employee_id == 3
    refused(site, site.provider.mint("rsa-1", exp=None), "no exp claim")


def test_iss_and_aud_are_compared_exactly(site) -> None:
    mint = site.provider.mint
    refused(site, mint("rsa-1", aud="oracle-rag-admin"), "aud")
    refused(site, mint("rsa-1", aud="oracle"), "aud")
    refused(site, mint("rsa-1", aud=None), "no aud claim")
    refused(site, mint("rsa-1", iss=ISSUER + "/"), "iss")
    refused(site, mint("rsa-1", iss="https://idp.example.test/realms/other"), "iss")
    assert caller_of(site, mint("rsa-1", aud=["account", AUDIENCE])).employee_id == 1  # one of its audiences


def test_an_unknown_key_id_reads_the_key_set_once_then_is_refused(site) -> None:
    assert caller_of(site, site.provider.mint("rsa-1")).employee_id == 1
    assert site.server.hits == 1
    site.identity.keys.clock.now += 30  # a read again happens at most every 30 s
    unknown = site.provider.mint("rsa-2")  # signed by a key the provider has not published
    refused(site, unknown, "no key with key id 'rsa-2'")
    assert site.server.hits == 2  # one read again
    refused(site, unknown, "no key with key id")
    assert site.server.hits == 2  # within the cooldown: no read at all
    site.identity.keys.clock.now += 30
    refused(site, unknown, "no key with key id")
    assert site.server.hits == 3


def test_rotated_keys_are_found_by_one_read_and_a_removed_key_stops_working(site) -> None:
    old = site.provider.mint("rsa-1", sub="2")
    assert caller_of(site, old).employee_id == 2
    site.provider.published = ["rsa-1", "ec-1", "rsa-2"]  # the provider publishes its next key first
    site.identity.keys.clock.now += 31
    assert caller_of(site, site.provider.mint("rsa-2", sub="3")).employee_id == 3
    assert site.server.hits == 2
    site.provider.published = ["rsa-2", "ec-1"]  # then retires the old one
    assert caller_of(site, old).employee_id == 2  # until the cached set is read again (jwks_refresh)
    site.identity.keys.clock.now += 3600
    refused(site, old, "no key with key id 'rsa-1'")


def test_alg_none_and_hs256_keyed_with_the_public_key_are_refused(site) -> None:
    refused(site, site.provider.forge_none("rsa-1"), "algorithm 'none' is not allowed")
    refused(site, site.provider.forge_hs256_with_public_key("rsa-1"), "algorithm 'HS256' is not allowed")
    # a key's own alg binds it: an ES256 token naming the RSA key's id is refused before any signature check
    forged = site.provider.mint("ec-1", sub="1")
    header, body, sig = forged.split(".")
    from jwt_helpers import b64

    renamed = b64(json.dumps({"alg": "ES256", "typ": "JWT", "kid": "rsa-1"}).encode())
    refused(site, f"{renamed}.{body}.{sig}", "not its key's")
    # a critical header extension this verifier does not know: refused, signed or not (RFC 7515)
    key = site.provider.private["rsa-1"]
    crit = pyjwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "sub": "1", "exp": int(NOW + 600)},
        key,
        algorithm="RS256",
        headers={"kid": "rsa-1", "crit": ["exp"], "exp": 1},
    )
    refused(site, crit, "header")
    # a valid signature over other claims: the claims were changed after signing
    other = site.provider.mint("rsa-1", sub="3").split(".")[1]
    refused(site, f"{header}.{other}.{sig}", "signature|not valid")


def test_configuration_refuses_none_hmac_and_an_issuer_without_audience_or_keys(idp) -> None:
    base = auth_settings(idp.server.url)
    for algorithms in ("none", "HS256", "RS256,HS512"):
        with pytest.raises(ConfigurationError, match="never none or HS"):
            load_settings(env={}, **{**base, "auth_algorithms": algorithms})
    with pytest.raises(ConfigurationError, match="audience"):
        load_settings(env={}, **{**base, "auth_audience": ""})
    with pytest.raises(ConfigurationError, match="jwks_url or jwks_file"):
        load_settings(env={}, auth_issuer=ISSUER, auth_audience=AUDIENCE)
    with pytest.raises(ConfigurationError, match="https"):
        load_settings(env={}, **{**base, "auth_jwks_url": "http://idp.example.test/jwks.json"})


def test_the_auth_table_of_the_configuration_file(tmp_path, idp) -> None:
    path = tmp_path / "oracle-rag.toml"
    path.write_text(
        f'[auth]\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\njwks_url = "{idp.server.url}"\n'
        f'algorithms = ["ES256"]\nroles_claim = "realm_access.roles"\nprefer = "token"\n'
    )
    settings = load_settings(env={}, config_file=path)
    assert (settings.auth_algorithms, settings.auth_roles_claim, settings.auth_prefer) == (
        "ES256",
        "realm_access.roles",
        "TOKEN",
    )
    path.write_text('[auth]\nissuer_url = "x"\n')
    with pytest.raises(ConfigurationError, match="unknown key 'issuer_url'"):
        load_settings(env={}, config_file=path)


def test_only_the_allowed_algorithms_are_accepted(make_settings, idp) -> None:
    rag = _deployment(make_settings, idp, auth_algorithms="ES256")
    try:
        identity = identity_for(rag.engine)
        identity.clock = Clock(NOW)
        with rag.engine.connect() as conn:
            assert identity.caller(conn, rag.engine, idp.provider.mint("ec-1", sub="3")).employee_id == 3
            with pytest.raises(InvalidTokenError, match="'RS256' is not allowed"):
                identity.caller(conn, rag.engine, idp.provider.mint("rsa-1", sub="3"))
    finally:
        rag.close()


def test_a_key_set_that_cannot_be_read_keeps_the_keys_read_last(site) -> None:
    token = site.provider.mint("rsa-1", sub="3")
    assert caller_of(site, token).employee_id == 3
    assert identity_status(site.rag.engine) == {
        "issuer": ISSUER,
        "audience": AUDIENCE,
        "key_set": site.server.url,
        "key_ids": ["ec-1", "rsa-1"],
        "key_set_error": None,
        "subject_query_error": None,
    }
    site.server.failing = True
    site.identity.keys.clock.now += 3600  # due: the read fails, the keys read last stay
    assert caller_of(site, token).employee_id == 3
    assert site.identity.keys.last_error == "reading the issuer's key set failed: HTTPError"
    site.identity.keys.clock.now += 3600
    status = identity_status(
        site.rag.engine
    )  # what `oracle-rag status` shows: the failure, and the keys still in use
    assert (status["key_ids"], status["key_set_error"]) == (["ec-1", "rsa-1"], site.identity.keys.last_error)
    fresh = KeySet(url=site.server.url, clock=Clock(0.0))  # never read: nothing to verify with
    with pytest.raises(InvalidTokenError, match="no key with key id"):
        fresh.key("rsa-1")


def test_the_key_set_from_a_file(tmp_path, site) -> None:
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(site.provider.jwks()))
    keys = KeySet(path=str(path), clock=Clock(0.0))
    assert keys.key("ec-1").alg == "ES256"
    with pytest.raises(InvalidTokenError):
        keys.key("rsa-2")
    path.write_text(
        json.dumps(
            {"keys": [site.provider.public_jwk("rsa-2"), {"kty": "oct", "k": "c2VjcmV0", "kid": "shared"}]}
        )
    )
    keys.clock.now += 30
    assert keys.key("rsa-2").alg == "RS256"  # rotated in the file, found by one read
    with pytest.raises(InvalidTokenError):
        keys.key("shared")  # a shared secret in the set is never a verification key


# -- who the caller is ---------------------------------------------------------------------
def test_the_subject_is_mapped_by_the_declared_query(make_settings, idp) -> None:
    rag = _deployment(make_settings, idp, auth_subject_query="SELECT subject, member_id FROM app_user")
    try:
        identity = identity_for(rag.engine)
        identity.clock = Clock(NOW)
        clock = identity.subjects.clock = Clock(0.0)  # the map's own clock: read first at 0
        with rag.engine.connect() as conn:
            bo = identity.caller(conn, rag.engine, idp.provider.mint("rsa-1", sub="auth0|bo"))
            assert (bo.employee_id, bo.groups, bo.name) == (2, ("g1",), "Bo Dev")
            # mapped, but no rows anywhere else: a caller with no roles and no groups (sees their own only)
            nobody = identity.caller(conn, rag.engine, idp.provider.mint("rsa-1", sub="auth0|nobody-rows"))
            assert (nobody.employee_id, nobody.roles, nobody.groups, nobody.sees_all) == (9, (), (), False)
            with pytest.raises(InvalidTokenError, match="maps no employee"):
                identity.caller(conn, rag.engine, idp.provider.mint("rsa-1", sub="auth0|stranger"))
            with pytest.raises(InvalidTokenError, match="maps no employee"):
                identity.caller(conn, rag.engine, idp.provider.mint("rsa-1", sub="2"))  # ids are not subjects
        # a user added to the host's table: found by one read again (at most every 30 s), not after the refresh
        with rag.engine.begin() as conn:
            conn.exec_driver_sql("INSERT INTO app_user VALUES ('auth0|di', 4)")
        newcomer = idp.provider.mint("rsa-1", sub="auth0|di")
        with rag.engine.connect() as conn:
            with pytest.raises(InvalidTokenError, match="maps no employee"):
                identity.caller(conn, rag.engine, newcomer)  # within the cooldown of the last read
            clock.now = 30.0
            assert identity.caller(conn, rag.engine, newcomer).employee_id == 4
    finally:
        rag.close()


def test_without_a_mapping_the_claim_must_be_an_id(site) -> None:
    refused(site, site.provider.mint("rsa-1", sub="auth0|bo"), "not an employee id")
    refused(site, site.provider.mint("rsa-1", sub="2.5"), "not an employee id")
    refused(site, site.provider.mint("rsa-1", sub=str(2**63)), "not an employee id")  # no database binds it


def test_a_declared_id_claim(make_settings, idp) -> None:
    rag = _deployment(make_settings, idp, auth_id_claim="ext.member_id")
    try:
        identity = identity_for(rag.engine)
        identity.clock = Clock(NOW)
        with rag.engine.connect() as conn:
            token = idp.provider.mint("rsa-1", sub="auth0|di", ext={"member_id": 4})  # a number or digits
            assert identity.caller(conn, rag.engine, token).employee_id == 4
            with pytest.raises(InvalidTokenError, match="no usable ext.member_id"):
                identity.caller(conn, rag.engine, idp.provider.mint("rsa-1", sub="4"))
    finally:
        rag.close()


@pytest.mark.parametrize("prefer", ["ACCESS", "TOKEN"])
def test_roles_and_groups_from_claims_or_from_the_access_queries(make_settings, idp, prefer) -> None:
    rag = _deployment(
        make_settings,
        idp,
        auth_roles_claim="realm_access.roles",
        auth_groups_claim="groups",
        auth_prefer=prefer,
    )
    try:
        identity = identity_for(rag.engine)
        identity.clock = Clock(NOW)
        token = idp.provider.mint(
            "rsa-1",
            sub="3",
            realm_access={"roles": ["lead", "bad\nrole", {"x": 1}]},
            groups=["g2", "g3", ["g4"], True],
        )
        with rag.engine.connect() as conn:
            caller = identity.caller(conn, rag.engine, token)
        if prefer == "TOKEN":  # the claims win (a value that is no role is skipped)
            assert (caller.roles, caller.groups, caller.sees_all) == (("lead",), ("g2", "g3"), True)
        else:  # the [access] queries win: member 3 is a developer in no group
            assert (caller.roles, caller.groups, caller.sees_all) == (("dev",), (), False)
        assert caller.name == "Cy Dev"
    finally:
        rag.close()


def test_claims_are_used_where_no_access_source_is_declared(make_settings, idp) -> None:
    settings = make_settings(
        see_all_roles="lead",
        auth_roles_claim="roles",
        auth_groups_claim="groups",
        **auth_settings(idp.server.url),
    )
    rag = RagSystem(settings, sources=[])
    rag.migrate()
    try:
        identity = identity_for(rag.engine)
        identity.clock = Clock(NOW)
        with rag.engine.connect() as conn:
            caller = identity.caller(
                conn, rag.engine, idp.provider.mint("rsa-1", sub="7", roles="lead", groups=["g1"])
            )
        assert (caller.employee_id, caller.roles, caller.groups, caller.sees_all) == (
            7,
            ("lead",),
            ("g1",),
            True,
        )
    finally:
        rag.close()


def test_an_unknown_employee_of_the_reference_application_is_refused(rag, idp) -> None:
    settings = rag.settings.with_overrides(**auth_settings(idp.server.url))
    identity = JwtIdentity(settings, clock=Clock(NOW))
    with rag.engine.connect() as conn:
        conn.exec_driver_sql(
            "INSERT INTO EMPLOYEE (EMPLOYEE_ID, FIRST_NAME, LAST_NAME, ROLE) "
            "VALUES (5, 'Eve', 'Known', 'developer')"
        )
        assert identity.caller(conn, rag.engine, idp.provider.mint("rsa-1", sub="5")).name == "Eve Known"
        with pytest.raises(InvalidTokenError, match="employee 999 not found"):
            identity.caller(conn, rag.engine, idp.provider.mint("rsa-1", sub="999"))


# -- the servers ----------------------------------------------------------------------------
@pytest.fixture
def served(site) -> Iterator[SimpleNamespace]:
    """The deployment's records (ALPHA owner-scoped, BETA group-scoped, GAMMA public) on waitress and MCP."""
    rag = site.rag
    scoped_records(rag)
    server = make_server(
        create_app({"ORACLE_RAG_SYSTEM": rag, "ORACLE_RAG_LLM": None}), "127.0.0.1", 0, threads=2
    )
    stop = threading.Event()
    thread = threading.Thread(target=serve_until, args=(server, stop), daemon=True)
    thread.start()
    try:
        yield SimpleNamespace(**vars(site), api=f"127.0.0.1:{server.effective_port}")
    finally:
        stop.set()
        thread.join(60)


def _bad_tokens(site: SimpleNamespace) -> dict[str, str]:
    mint, p = site.provider.mint, site.provider
    return {
        "expired": mint("rsa-1", now=NOW - 3600),
        "not yet valid": mint("rsa-1", nbf=int(NOW + 600)),
        "wrong aud": mint("rsa-1", aud="another-app"),
        "wrong iss": mint("rsa-1", iss="https://evil.test"),
        "unknown kid": mint("rsa-2"),
        "alg none": p.forge_none("rsa-1"),
        "hs256 with the public key": p.forge_hs256_with_public_key("rsa-1"),
        "not an id": mint("rsa-1", sub="auth0|bo"),
        "garbage": "a.b.c",
        "opaque, unknown": "orag_" + "x" * 43,
    }


def test_every_refusal_is_the_same_401_and_the_reason_is_logged_without_the_token(served, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="oracle_rag.callers.identity")
    nobody = http_request(served.api, "GET", "/api/me")
    nobody_v1 = http_request(served.api, "GET", "/v1/models")
    assert nobody.status == 401 and nobody_v1.status == 401
    for reason, token in _bad_tokens(served).items():
        headers = {"Authorization": f"Bearer {token}"}
        got = http_request(served.api, "GET", "/api/me", headers=headers)
        assert (got.status, got.body, got.headers["www-authenticate"]) == (
            401,
            nobody.body,
            nobody.headers["www-authenticate"],
        ), reason
        got_v1 = http_request(served.api, "GET", "/v1/models", headers=headers)
        assert (got_v1.status, got_v1.body) == (401, nobody_v1.body), reason
    logged = "\n".join(r.getMessage() for r in caplog.records)
    for reason in (
        "expired",
        "not valid yet",
        "aud",
        "iss",
        "no key with key id 'rsa-2'",
        "'none' is not allowed",
        "'HS256' is not allowed",
        "not an employee id",
    ):
        assert reason in logged, reason
    for token in _bad_tokens(served).values():
        signature = token.split(".")[-1]
        assert token not in logged and (len(signature) < 16 or signature not in logged)


def test_a_jwt_caller_on_the_api_and_the_openai_sdk(served) -> None:
    token = served.provider.mint("rsa-1", sub="2")
    me = http_request(served.api, "GET", "/api/me", headers={"Authorization": f"Bearer {token}"}).json()
    assert (me["employee_id"], me["name"], me["roles"], me["groups"]) == (2, "Bo Dev", ["dev"], ["g1"])
    # scope: member 2 owns ALPHA #1 and #5 (i % 4 + 1 == 2) and is in g1 (BETA #1); GAMMA is public
    for key, status in (
        (("ALPHA", "1"), 200),
        (("ALPHA", "2"), 404),
        (("BETA", "1"), 200),
        (("BETA", "2"), 404),
        (("GAMMA", "3"), 200),
    ):
        got = http_request(
            served.api, "GET", f"/api/chunks/{key[0]}/{key[1]}", headers={"Authorization": f"Bearer {token}"}
        )
        assert got.status == status, key
    # the API tokens stay
    opaque = create_token(served.rag.engine, 3, check_employee=False).token
    assert (
        http_request(served.api, "GET", "/api/me", headers={"Authorization": f"Bearer {opaque}"}).json()[
            "employee_id"
        ]
        == 3
    )

    client = openai.OpenAI(base_url=f"http://{served.api}/v1", api_key=token, max_retries=0, timeout=60)
    completion = client.chat.completions.create(
        model=MODEL_ID, messages=[{"role": "user", "content": "zebra record"}]
    )
    cited = {(c["source_type"], c["source_id"]) for c in (completion.model_extra or {})["citations"]}
    assert cited and cited <= MEMBER_TWO_SEES
    refused_client = openai.OpenAI(
        base_url=f"http://{served.api}/v1",
        api_key=served.provider.mint("rsa-1", aud="x"),
        max_retries=0,
        timeout=60,
    )
    with pytest.raises(openai.AuthenticationError):
        refused_client.models.list()


def test_a_caller_with_no_rows_reads_only_public_records(served) -> None:
    token = served.provider.mint("rsa-1", sub="77")  # no member, role or group row: owns nothing
    headers = {"Authorization": f"Bearer {token}"}
    me = http_request(served.api, "GET", "/api/me", headers=headers).json()
    assert (me["employee_id"], me["roles"], me["groups"], me["sees_all"]) == (77, [], [], False)
    for t, i in RECORDS:
        got = http_request(served.api, "GET", f"/api/chunks/{t}/{i}", headers=headers)
        assert got.status == (200 if t == "GAMMA" else 404), (t, i)


def test_mcp_with_a_bearer_jwt_and_its_protected_resource_metadata(served) -> None:
    rag = served.rag
    resource = "https://rag.example.test/mcp"
    with uvicorn_app(http_app(rag, chat=Chat(rag, None), resource_url=resource)) as url:
        metadata = httpx2.get(url + "/.well-known/oauth-protected-resource/mcp", timeout=60)
        assert metadata.status_code == 200
        body = metadata.json()
        assert (body["resource"], body["authorization_servers"], body["bearer_methods_supported"]) == (
            resource,
            [ISSUER],
            ["header"],
        )
        refused_ = httpx2.post(
            url + MCP_PATH,
            json={},
            timeout=60,
            headers={"Authorization": f"Bearer {served.provider.mint('rsa-1', aud='x')}"},
        )
        assert refused_.status_code == 401
        assert (
            'resource_metadata="https://rag.example.test/.well-known/oauth-protected-resource/mcp"'
            in refused_.headers["www-authenticate"]
        )
        for token in _bad_tokens(served).values():  # every refusal: the same 401 body as no token at all
            again = httpx2.post(
                url + MCP_PATH, json={}, timeout=60, headers={"Authorization": f"Bearer {token}"}
            )
            assert (again.status_code, again.content) == (401, refused_.content)
        assert httpx2.post(url + MCP_PATH, json={}, timeout=60).content == refused_.content

        async def as_member_two() -> set[tuple[str, str]]:
            async with http_client(url, served.provider.mint("rsa-1", sub="2")) as client:
                found = await client.call_tool(
                    "search", {"query": "zebra record", "mode": "keyword", "k": 100}
                )
                assert not found.is_error
                return {(h["source_type"], h["source_id"]) for h in found.structured_content["hits"]}

        assert anyio.run(as_member_two) == MEMBER_TWO_SEES


def test_mcp_on_stdio_takes_a_jwt_in_its_token_variable(site) -> None:
    good = StdioIdentity(
        site.rag, "ORACLE_RAG_MCP_TOKEN", {"ORACLE_RAG_MCP_TOKEN": site.provider.mint("ec-1", sub="2")}
    )
    assert good.resolve().groups == ("g1",)
    expired = site.provider.mint("ec-1", sub="2", now=NOW - 7200)
    with pytest.raises(MCPError, match="is not valid"):
        StdioIdentity(site.rag, "ORACLE_RAG_MCP_TOKEN", {"ORACLE_RAG_MCP_TOKEN": expired}).resolve()
