"""DNS rebinding: requests must name an allowed Host; demo identities only to loopback."""

from __future__ import annotations

import http.client
import threading

import pytest
from chat_helpers import bearer, issue_tokens
from werkzeug.serving import make_server

from oracle_rag.errors import ConfigurationError
from oracle_rag.hosts import host_name
from oracle_rag.web import DemoIdentity, create_app

DEV = 20


def _app(rag, **config):
    return create_app({"ORACLE_RAG_SYSTEM": rag, "ORACLE_RAG_LLM": None, "TESTING": True, **config})


@pytest.mark.parametrize("path", ["/api/me", "/", "/metrics", "/api/openapi.json", "/v1/models"])
@pytest.mark.parametrize(
    "host",
    [
        "evil.example",
        "evil.example:8000",
        "127.0.0.1.evil.example",
        "localhost.",
        "[::2]:80",
        "",
        "local host",
        "localhost:80:90",
    ],
)
def test_a_foreign_or_malformed_host_is_refused(demo_rag, path, host):
    client = _app(demo_rag).test_client()
    token = issue_tokens(demo_rag, (DEV,))[DEV]
    response = client.get(path, headers={"Host": host, **bearer(token)})
    if host == "localhost.":  # the same name, fully qualified
        assert response.status_code != 400
        return
    assert response.status_code == 400, (host, path)
    body = response.get_json()
    assert body["code"] == "HOST_NOT_ALLOWED"
    if host:
        assert host.split(":")[0] not in body["error"]  # the refused name is not echoed


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1:5000", "[::1]:8000", "LOCALHOST"])
def test_loopback_names_are_allowed_by_default(demo_rag, host):
    client = _app(demo_rag).test_client()
    token = issue_tokens(demo_rag, (DEV,))[DEV]
    assert client.get("/api/me", headers={"Host": host, **bearer(token)}).status_code == 200


def test_healthz_is_exempt(demo_rag):
    response = _app(demo_rag).test_client().get("/healthz", headers={"Host": "10.0.0.5:8000"})
    assert response.status_code in (200, 503)


def test_configured_names_are_allowed_and_only_they(demo_rag, make_settings):
    from oracle_rag.system import RagSystem

    rag = RagSystem(make_settings(allowed_hosts="chat.example.com, 10.0.0.5"), engine=demo_rag.engine)
    client = _app(rag).test_client()
    token = issue_tokens(rag, (DEV,))[DEV]
    for host, status in (("chat.example.com", 200), ("10.0.0.5:8000", 200), ("localhost", 400)):
        assert client.get("/api/me", headers={"Host": host, **bearer(token)}).status_code == status, host


@pytest.mark.parametrize("value", ["", " , ", "http://x", "a/b", "host:80", "x" * 300])
def test_invalid_allowed_hosts_fail_at_start_up(make_settings, value):
    with pytest.raises(ConfigurationError, match="allowed_hosts"):
        make_settings(allowed_hosts=value)


def test_demo_identities_only_for_a_loopback_host_and_peer(demo_rag, make_settings):
    from oracle_rag.system import RagSystem

    rag = RagSystem(
        make_settings(demo=True, allowed_hosts="localhost,127.0.0.1,::1,demo.example"), engine=demo_rag.engine
    )
    ident = DemoIdentity(1, "Admin", "admin", issue_tokens(rag, (1,))[1])
    client = _app(rag, ORACLE_RAG_DEMO_IDENTITIES=[ident]).test_client()
    assert client.get("/api/demo/identities", headers={"Host": "localhost:8000"}).status_code == 200
    # an allowed but non-loopback name (a rebound or LAN name) does not get the tokens
    refused = client.get("/api/demo/identities", headers={"Host": "demo.example"})
    assert refused.status_code == 404 and ident.token not in refused.get_data(as_text=True)
    # nor does a peer that is not on this machine, whatever Host it names
    remote = client.get(
        "/api/demo/identities", headers={"Host": "localhost"}, environ_base={"REMOTE_ADDR": "192.168.1.20"}
    )
    assert remote.status_code == 404


def test_rebinding_against_a_real_server_on_loopback(demo_rag, make_settings):
    """A browser whose page rebound evil.example to 127.0.0.1 sends Host: evil.example."""
    from oracle_rag.system import RagSystem

    rag = RagSystem(make_settings(demo=True), engine=demo_rag.engine)
    ident = DemoIdentity(1, "Admin", "admin", issue_tokens(rag, (1,))[1])
    server = make_server("127.0.0.1", 0, _app(rag, ORACLE_RAG_DEMO_IDENTITIES=[ident]), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:

        def get(path, host):
            conn = http.client.HTTPConnection("127.0.0.1", server.server_port, timeout=30)
            conn.request("GET", path, headers={"Host": host})
            response = conn.getresponse()
            return response.status, response.read().decode()

        status, body = get("/api/demo/identities", f"evil.example:{server.server_port}")
        assert status == 400 and ident.token not in body
        status, body = get("/api/demo/identities", f"127.0.0.1:{server.server_port}")
        assert status == 200 and ident.token in body
    finally:
        server.shutdown()
        thread.join()


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("Example.COM:443", "example.com"),
        ("[::1]:8000", "::1"),
        ("[::1]", "::1"),
        ("[zz]", None),
        ("a:b", None),
        (None, None),
    ],
)
def test_host_name_parsing(header, name):
    assert host_name(header) == name


def test_metrics_only_for_loopback_peers_by_default(demo_rag):
    client = _app(demo_rag).test_client()
    assert client.get("/metrics").status_code == 200  # the test client's peer is 127.0.0.1
    remote = client.get("/metrics", environ_base={"REMOTE_ADDR": "10.1.2.3"})
    assert remote.status_code == 403 and "oracle_rag_" not in remote.get_data(as_text=True)


def test_metrics_token_when_configured(demo_rag, make_settings, monkeypatch):
    from oracle_rag.system import RagSystem

    monkeypatch.setenv("TEST_METRICS_TOKEN", "m-7c1d")
    rag = RagSystem(make_settings(metrics_token_env="TEST_METRICS_TOKEN"), engine=demo_rag.engine)
    client = _app(rag).test_client()
    assert client.get("/metrics").status_code == 403  # loopback is not enough once a token is set
    assert client.get("/metrics", headers=bearer("wrong")).status_code == 403
    ok = client.get("/metrics", headers=bearer("m-7c1d"), environ_base={"REMOTE_ADDR": "10.1.2.3"})
    assert ok.status_code == 200 and "oracle_rag_queue_depth" in ok.get_data(as_text=True)
    monkeypatch.delenv("TEST_METRICS_TOKEN")
    assert client.get("/metrics", headers=bearer("")).status_code == 403  # an unset variable opens nothing


def test_metrics_publish_no_data_counts(demo_rag):
    text = _app(demo_rag).test_client().get("/metrics").get_data(as_text=True)
    assert "oracle_rag_chunks" not in text and "source_type" not in text
