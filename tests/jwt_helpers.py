"""A host's identity provider, made in the test: its keys, its JWKS served on 127.0.0.1, its tokens.

The keys are generated here (cryptography); the key set is served by a real
HTTP server on a free loopback port that counts its requests, and the set it
serves can be changed (rotation). Tokens are signed by PyJWT, except the two
forgeries PyJWT refuses to make (``alg: none`` and HS256 keyed with the public
key), which are put together by hand: that is what an attacker would send.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import sqlalchemy as sa
from access_property_helpers import RECORDS, write_synthetic_records
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from oracle_rag.sources.access import AccessPolicy, record_access
from oracle_rag.system import RagSystem

ISSUER = "https://idp.example.test/realms/crm"
AUDIENCE = "oracle-rag"
NOW = 1_767_225_600.0  # the tests' wall clock (2026-01-01), injected: no token depends on when the suite runs


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class Provider:
    """An identity provider's signing keys (by key id) and the subset it publishes."""

    def __init__(self) -> None:
        self.private: dict[str, Any] = {}
        self.published: list[str] = []

    def add_rsa(self, kid: str, publish: bool = True) -> None:
        self.private[kid] = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        if publish:
            self.published.append(kid)

    def add_ec(self, kid: str, publish: bool = True) -> None:
        self.private[kid] = ec.generate_private_key(ec.SECP256R1())
        if publish:
            self.published.append(kid)

    def public_jwk(self, kid: str) -> dict[str, Any]:
        key = self.private[kid]
        if isinstance(key, rsa.RSAPrivateKey):
            jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
            alg = "RS256"
        else:
            jwk = jwt.algorithms.ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
            alg = "ES256"
        return {**jwk, "kid": kid, "alg": alg, "use": "sig"}

    def jwks(self) -> dict[str, Any]:
        return {"keys": [self.public_jwk(k) for k in self.published]}

    def public_pem(self, kid: str) -> bytes:
        return (
            self.private[kid]
            .public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        )

    def mint(
        self,
        kid: str,
        *,
        sub: Any = "1",
        now: float = NOW,
        lifetime: float = 600.0,
        alg: str | None = None,
        **claims: Any,
    ) -> str:
        """A token signed with ``kid``'s key: iss, aud, sub, iat, exp (``now`` + ``lifetime``) and ``claims``.

        A claim given as None is left out (``exp=None``: no expiry claim).
        """
        key = self.private[kid]
        body = {
            "iss": ISSUER,
            "aud": AUDIENCE,
            "sub": sub,
            "iat": int(now),
            "exp": int(now + lifetime),
            **claims,
        }
        body = {k: v for k, v in body.items() if v is not None}
        algorithm = alg or ("RS256" if isinstance(key, rsa.RSAPrivateKey) else "ES256")
        return jwt.encode(body, key, algorithm=algorithm, headers={"kid": kid})

    def forge_none(self, kid: str, **claims: Any) -> str:
        """``alg: none``: the claims with no signature at all."""
        header = b64(json.dumps({"alg": "none", "typ": "JWT", "kid": kid}).encode())
        body = b64(json.dumps(_claims(claims)).encode())
        return f"{header}.{body}."

    def forge_hs256_with_public_key(self, kid: str, **claims: Any) -> str:
        """HS256 keyed with the public key's PEM: valid if a verifier took that public text as a secret."""
        header = b64(json.dumps({"alg": "HS256", "typ": "JWT", "kid": kid}).encode())
        body = b64(json.dumps(_claims(claims)).encode())
        signature = hmac.new(self.public_pem(kid), f"{header}.{body}".encode(), hashlib.sha256).digest()
        return f"{header}.{body}.{b64(signature)}"


def _claims(claims: dict[str, Any]) -> dict[str, Any]:
    return {"iss": ISSUER, "aud": AUDIENCE, "sub": "1", "iat": int(NOW), "exp": int(NOW + 600), **claims}


class JwksServer:
    """The provider's key set over HTTP on 127.0.0.1 (``url``); ``hits`` counts the requests."""

    def __init__(self, provider: Provider) -> None:
        self.provider = provider
        self.hits = 0
        self.failing = False
        served = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the handler's protocol
                served.hits += 1
                if self.path != "/jwks.json" or served.failing:
                    self.send_error(404 if not served.failing else 503)
                    return
                body = json.dumps(served.provider.jwks()).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/jwks.json"


@contextmanager
def jwks_server(provider: Provider) -> Iterator[JwksServer]:
    server = JwksServer(provider)
    thread = threading.Thread(target=server.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.httpd.shutdown()
        server.httpd.server_close()
        thread.join(30)


def auth_settings(jwks_url: str, **more: Any) -> dict[str, Any]:
    """The ``[auth]`` settings (as load_settings overrides) for the test provider."""
    return {"auth_issuer": ISSUER, "auth_audience": AUDIENCE, "auth_jwks_url": jwks_url, **more}


class Clock:
    """An injected clock: ``now`` moves only when a test moves it."""

    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# The deployment: members 1..4 (no EMPLOYEE table), 1 a lead (sees all), 2 in team "g1";
# member 9 has a subject but no roles, groups or records; the provider's subjects are opaque text.
MEMBERS = {
    1: ("Ada Lead", ("lead",), ()),
    2: ("Bo Dev", ("dev",), ("g1",)),
    3: ("Cy Dev", ("dev",), ()),
    4: ("Di Ops", ("ops",), ("g2",)),
}
SUBJECTS = {"auth0|ada": 1, "auth0|bo": 2, "auth0|cy": 3, "auth0|nobody-rows": 9}
# The records of tests/access_property_helpers.py: ALPHA owner-scoped (owner i % 4 + 1), BETA group-scoped
# (#1 in g1), GAMMA public; what member 2 (owner of ALPHA #1 and #5, in g1) may read.
POLICIES = {
    "ALPHA": AccessPolicy(("owner",)),
    "BETA": AccessPolicy(("group",)),
    "GAMMA": AccessPolicy(("public",)),
}
MEMBER_TWO_SEES = {("ALPHA", "1"), ("ALPHA", "5"), ("BETA", "1")} | {("GAMMA", str(i)) for i in range(1, 9)}


def deployment_tables(rag: RagSystem) -> None:
    """The host's own tables: members (names), their roles and groups, the provider's subjects."""
    with rag.engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE member (member_id INTEGER PRIMARY KEY, name TEXT)")
        conn.exec_driver_sql("CREATE TABLE member_role (member_id INTEGER, role TEXT)")
        conn.exec_driver_sql("CREATE TABLE member_group (member_id INTEGER, grp TEXT)")
        conn.exec_driver_sql("CREATE TABLE app_user (subject TEXT PRIMARY KEY, member_id INTEGER)")
        for i, (name, roles, groups) in MEMBERS.items():
            conn.execute(sa.text("INSERT INTO member VALUES (:i, :n)"), {"i": i, "n": name})
            for role in roles:
                conn.execute(sa.text("INSERT INTO member_role VALUES (:i, :r)"), {"i": i, "r": role})
            for group in groups:
                conn.execute(sa.text("INSERT INTO member_group VALUES (:i, :g)"), {"i": i, "g": group})
        for subject, i in SUBJECTS.items():
            conn.execute(sa.text("INSERT INTO app_user VALUES (:s, :i)"), {"s": subject, "i": i})


def scoped_records(rag: RagSystem) -> None:
    """The synthetic records, indexed, with :data:`POLICIES`' access."""
    with rag.engine.begin() as conn:
        write_synthetic_records(rag, conn)
        rag.engine.write_access(
            conn,
            [
                (t, i, record_access(POLICIES[t], int(i) % 4 + 1, ["g1"] if i == "1" else []))
                for t, i in RECORDS
            ],
        )
