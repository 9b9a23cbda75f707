"""The chat page behind a host application's login: docs/identity.md's example, run as written.

The Python block of docs/identity.md's "The page behind your login" is executed
as the host's module (its one piece of host code, ``check_password``, given
here), configured by an ``oracle-rag.toml`` with the deployment's own tables
(members, roles, groups, names; no reference application) and the test's
identity provider. The host app is served by waitress on 127.0.0.1 and used
over HTTP with a cookie jar: signed out, signed in (Flask-Login's session),
signed out again, and with a JWT from the provider instead of a session. The
same member gets the same caller (name from ``[people]``, roles and groups
from ``[access]``) and the same records either way.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import httpx2
import pytest
from access_property_helpers import RECORDS
from jwt_helpers import (
    AUDIENCE,
    ISSUER,
    MEMBER_TWO_SEES,
    MEMBERS,
    NOW,
    Clock,
    Provider,
    deployment_tables,
    jwks_server,
    scoped_records,
)

from oracle_rag.callers.identity import identity_for
from oracle_rag.config import load_settings
from oracle_rag.system import RagSystem
from oracle_rag.web.server import make_server, serve_until

DOC = Path(__file__).resolve().parent.parent / "docs" / "identity.md"
PASSWORDS = {"bo": ("bo-secret", 2), "cy": ("cy-secret", 3)}


def host_example() -> str:
    """The Python block under "The page behind your login"."""
    text = DOC.read_text("utf-8")
    section = text[text.index("## The page behind your login") :]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "docs/identity.md has the host example"
    return found.group(1)


def check_password(user: str, password: str) -> int | None:
    """The host's own credential check (the one line the example leaves to the host)."""
    known = PASSWORDS.get(user)
    return known[1] if known and known[0] == password else None


@pytest.fixture
def host(tmp_path: Path, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    provider = Provider()
    provider.add_rsa("rsa-1")
    with jwks_server(provider) as jwks:
        config = tmp_path / "oracle-rag.toml"
        config.write_text(
            f'data_dir = "{data_dir}"\nreference_app = "OFF"\n'
            '[access]\nsee_all_roles = ["lead"]\nroles_query = "SELECT member_id, role FROM member_role"\n'
            'groups_query = "SELECT member_id, grp FROM member_group"\n'
            '[people]\nquery = "SELECT member_id, name FROM member"\n'
            f'[auth]\nissuer = "{ISSUER}"\naudience = "{AUDIENCE}"\n'
            f'jwks_url = "{jwks.url}"\n',
            "utf-8",
        )
        setup = RagSystem(load_settings(env={}, config_file=config), sources=[])
        setup.migrate()
        deployment_tables(setup)
        scoped_records(setup)
        setup.close()
        monkeypatch.setenv("ORACLE_RAG_CONFIG", str(config))
        monkeypatch.setenv("HOST_SECRET_KEY", "a host's session key, for the test")
        module: dict = {"__name__": "host_app", "check_password": check_password}
        exec(compile(host_example(), str(DOC), "exec"), module)  # noqa: S102 - the documented example, as written
        rag = module["rag"]
        identity = identity_for(rag.engine)
        assert identity is not None
        identity.clock = Clock(NOW)
        server = make_server(module["app"], "127.0.0.1", 0, threads=2)
        stop = threading.Event()
        thread = threading.Thread(target=serve_until, args=(server, stop), daemon=True)
        thread.start()
        try:
            yield SimpleNamespace(base=f"http://127.0.0.1:{server.effective_port}", provider=provider)
        finally:
            stop.set()
            thread.join(60)
            rag.close()


def readable(client: httpx2.Client, base: str, **headers: str) -> set[tuple[str, str]]:
    """The records the record view opens for this client (200), the others being the one 404."""
    out = set()
    for t, i in RECORDS:
        got = client.get(f"{base}/assistant/api/chunks/{t}/{i}", headers=headers)
        assert got.status_code in (200, 404), (t, i, got.status_code)
        if got.status_code == 200:
            out.add((t, i))
    return out


def test_the_page_behind_the_hosts_login_and_a_jwt_are_the_same_caller(host) -> None:
    with httpx2.Client(timeout=60, follow_redirects=False) as browser:
        assert browser.get(f"{host.base}/assistant/api/me").status_code == 401  # signed out
        assert browser.post(f"{host.base}/login", data={"user": "bo", "password": "wrong"}).status_code == 401
        signed_in = browser.post(f"{host.base}/login", data={"user": "bo", "password": "bo-secret"})
        assert signed_in.status_code == 302 and signed_in.headers["location"] == "/assistant/"
        page = browser.get(f"{host.base}/assistant/")
        assert page.status_code == 200 and "text/html" in page.headers["content-type"]
        me = browser.get(f"{host.base}/assistant/api/me").json()
        name, roles, groups = MEMBERS[2]
        assert (me["employee_id"], me["name"], me["roles"], me["groups"]) == (
            2,
            name,
            list(roles),
            list(groups),
        )
        assert readable(browser, host.base) == MEMBER_TWO_SEES
        answer = browser.post(f"{host.base}/assistant/api/chat", json={"question": "zebra record"})
        assert answer.status_code == 200
        assert {(c["source_type"], c["source_id"]) for c in answer.json()["citations"]} <= MEMBER_TWO_SEES
        assert browser.post(f"{host.base}/logout").status_code == 302
        assert browser.get(f"{host.base}/assistant/api/me").status_code == 401

    token = host.provider.mint("rsa-1", sub="2")
    with httpx2.Client(timeout=60) as api:  # no session: the provider's JWT
        bearer = {"Authorization": f"Bearer {token}"}
        assert api.get(f"{host.base}/assistant/api/me", headers=bearer).json() == me
        assert readable(api, host.base, **bearer) == MEMBER_TWO_SEES
        refused = api.get(
            f"{host.base}/assistant/api/me",
            headers={"Authorization": f"Bearer {host.provider.mint('rsa-1', sub='2', aud='x')}"},
        )
        assert refused.status_code == 401
