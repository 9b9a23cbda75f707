"""Callers from the host's identity provider: Bearer JWTs checked against its key set (docs/identity.md).

A deployment with single sign-on declares its provider in ``[auth]``; a
token from it is then a caller on ``/api``, ``/v1`` and MCP's HTTP, beside
the product's own opaque API tokens (oracle_rag/callers/tokens.py), which stay.

What a token must be, all checked by PyJWT except the clock:

* signed with a key of the issuer's JSON Web Key Set (``jwks_url``, cached
  for ``jwks_refresh`` and read again at once, at most every
  :data:`REFETCH_COOLDOWN_S`, when a token names a key id it does not hold:
  that is how a rotated key is found; or ``jwks_file``);
* with an algorithm in the declared allow-list (public-key algorithms only:
  configuration refuses ``none`` and HS*, so a public key is never taken as
  an HMAC secret), which must also be the key's own ``alg`` when it names one;
* ``iss`` exactly the issuer, ``aud`` naming the audience exactly, ``exp``
  present and not past, ``nbf`` (when present) not ahead, both within
  ``leeway``. The clock is injected (PyJWT reads the wall clock itself, so
  its exp/nbf checks are off and the same two comparisons are made here
  against ``clock()``), which is how tests move time without sleeping.

Who the caller is: the ``id_claim`` (``sub`` by default) is the employee id,
or is mapped to one by ``subject_query`` (``SELECT claim value, employee id``,
read on the read-only session and kept for ``[access] refresh``, like the
``[access]`` queries; a failed read maps nobody: fail closed). Roles and
groups: the declared claims, or the ``[access]`` queries (EMPLOYEE.ROLE in
the reference app); where both give one, ``prefer`` says which is used. The
caller is then built by :func:`oracle_rag.callers.access.load_caller`, so names
(``[people]``), see-all roles and an unknown EMPLOYEE id behave as for any
caller.

Every refusal raises :class:`~oracle_rag.errors.InvalidTokenError` whose
message is the reason, for the log; :func:`caller_for_bearer` logs it
(never the token) and returns None, and the web layer answers every None
with the same 401.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import jwt
import sqlalchemy as sa

from oracle_rag.callers.access import directory_for, load_caller
from oracle_rag.callers.caller import Caller, check_role
from oracle_rag.callers.people import person_id
from oracle_rag.callers.tokens import caller_for_token, looks_like_token
from oracle_rag.config import Settings, duration_seconds
from oracle_rag.engines import Engine
from oracle_rag.engines.per_engine import PerEngine
from oracle_rag.engines.records import check_group
from oracle_rag.errors import AccessError, InputError, InvalidTokenError, NotFoundError, RagError
from oracle_rag.sources.connections import read_session
from oracle_rag.sources.sql_query import check_query

log = logging.getLogger("oracle_rag.callers.identity")

REFETCH_COOLDOWN_S = 30.0  # an unknown key id reads the key set again at most this often
FETCH_TIMEOUT_S = 5.0
MAX_JWKS_BYTES = 1_000_000
MAX_TOKEN_CHARS = 16_384
QUERY_TIMEOUT_S = 30.0
ID_MIN, ID_MAX = -(2**63), 2**63 - 1  # an id the databases can bind (a signed 64-bit integer)
_JWT_SHAPE = re.compile(r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*$")


def looks_like_jwt(value: str) -> bool:
    """Three base64url parts (the JWS compact form): worth decoding."""
    return isinstance(value, str) and len(value) <= MAX_TOKEN_CHARS and bool(_JWT_SHAPE.match(value))


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """The key set is read from the URL configured, never from where a redirect points."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def _fetch_url(url: str) -> bytes:
    opener = urllib.request.build_opener(_NoRedirect)
    request = urllib.request.Request(url, headers={"Accept": "application/json", "User-Agent": "oracle-rag"})
    with opener.open(request, timeout=FETCH_TIMEOUT_S) as response:
        if response.status != 200:
            raise OSError(f"HTTP {response.status}")
        body: bytes = response.read(MAX_JWKS_BYTES + 1)
    if len(body) > MAX_JWKS_BYTES:
        raise OSError("the key set is larger than 1 MB")
    return body


class SigningKey(NamedTuple):
    """A public key of the set and the algorithm its JWK names (None: any allowed one its type fits)."""

    key: Any
    alg: str | None


class KeySet:
    """The issuer's signing keys by key id, read from its URL or a file and kept for ``refresh_s``.

    Thread-safe; one read at a time (requests that need the keys wait for it
    rather than each fetching). A read that fails keeps the keys read last
    (a provider's outage does not log everyone out) and is logged.
    """

    def __init__(
        self,
        *,
        url: str | None = None,
        path: str | None = None,
        refresh_s: float = 3600.0,
        cooldown_s: float = REFETCH_COOLDOWN_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if (url is None) == (path is None):
            raise ValueError("give url or path")
        self.url, self.path = url, path
        self.refresh_s, self.cooldown_s, self.clock = refresh_s, cooldown_s, clock
        self._lock = threading.Lock()
        self._keys: dict[str | None, list[SigningKey]] | None = None
        self._loaded_at: float | None = None
        self._tried_at: float | None = None
        self.reads = 0  # how many times the key set was read (what `oracle-rag status` and tests see)
        self.last_error: str | None = None

    def key(self, kid: str | None) -> SigningKey:
        """The signing key ``kid`` names (a token without one: the set's only key), or InvalidTokenError."""
        with self._lock:
            now = self.clock()
            if self._keys is None or self._loaded_at is None or now - self._loaded_at >= self.refresh_s:
                self._read(now)
            found = self._match(kid)
            if found is None and (self._tried_at is None or now - self._tried_at >= self.cooldown_s):
                self._read(now)  # one read again: a rotated key is published before tokens use it
                found = self._match(kid)
        if found is None:
            raise InvalidTokenError(
                f"no key with key id {str(kid)[:64]!r} in the issuer's key set"
                if kid is not None
                else "the token names no key id and the key set has more than one key"
            )
        return found

    def key_ids(self) -> list[str]:
        """The key ids held now, read first when due (what ``oracle-rag status`` shows)."""
        with self._lock:
            now = self.clock()
            if self._keys is None or self._loaded_at is None or now - self._loaded_at >= self.refresh_s:
                self._read(now)
            return sorted(str(kid) if kid is not None else "(no kid)" for kid in (self._keys or {}))

    def _match(self, kid: str | None) -> SigningKey | None:
        keys = self._keys or {}
        if kid is None:
            every = [k for group in keys.values() for k in group]
            return every[0] if len(every) == 1 else None
        found = keys.get(kid) or []
        return found[0] if len(found) == 1 else None  # two keys with one id: neither (ambiguous)

    def _read(self, now: float) -> None:
        self._tried_at = now
        self.reads += 1
        try:
            raw = _fetch_url(self.url) if self.url is not None else Path(str(self.path)).read_bytes()
            data = json.loads(raw)
            if not isinstance(data, dict) or not isinstance(data.get("keys"), list):
                raise ValueError("not a JSON Web Key Set (an object with keys)")
            keys: dict[str | None, list[SigningKey]] = {}
            for entry in data["keys"]:
                if (
                    not isinstance(entry, dict)
                    or entry.get("use", "sig") != "sig"
                    or entry.get("kty") == "oct"
                ):
                    continue  # an encryption key, or a shared secret: never a key a public verifier holds
                try:
                    key = jwt.PyJWK(entry)
                except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
                    continue  # a key type or curve this side cannot use: not a signing key for us
                alg = entry.get("alg")
                keys.setdefault(entry.get("kid") if isinstance(entry.get("kid"), str) else None, []).append(
                    SigningKey(key.key, alg if isinstance(alg, str) else None)
                )
        except (OSError, ValueError) as exc:  # URLError and JSONDecodeError are these
            self.last_error = f"reading the issuer's key set failed: {type(exc).__name__}"
            log.warning("identity: %s (the keys read last stay in use)", self.last_error)
            return
        self._keys, self._loaded_at, self.last_error = keys, now, None


class SubjectMap:
    """Employee ids by the provider's id claim, read by ``[auth] subject_query`` (fail closed).

    Kept for ``refresh_s``; a subject it does not hold reads it again at once, at most every
    :data:`REFETCH_COOLDOWN_S`, so a user added to the host's table signs in without waiting for
    the refresh, and a stream of unknown subjects costs one read per cooldown.
    """

    def __init__(self, query: str, refresh_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.query = check_query(query, key="auth.subject_query")
        self.refresh_s, self.clock = refresh_s, clock
        self._lock = threading.Lock()
        self._ids: dict[str, int] = {}
        self._loaded_at: float | None = None
        self.last_error: str | None = None

    def employee_id(self, engine: sa.Engine, subject: str) -> int | None:
        now = self.clock()
        with self._lock:
            due = self._loaded_at is None or now - self._loaded_at >= self.refresh_s
            if not due and subject not in self._ids:
                due = self._loaded_at is None or now - self._loaded_at >= REFETCH_COOLDOWN_S
            if due:
                self._loaded_at = now
        if due:
            ids = self._read(engine)
            with self._lock:
                self._ids = ids
        with self._lock:
            return self._ids.get(subject)

    def _read(self, engine: sa.Engine) -> dict[str, int]:
        out: dict[str, int] = {}
        try:
            with read_session(engine, source="auth.subject_query", timeout_s=QUERY_TIMEOUT_S) as conn:
                for row in conn.exec_driver_sql(self.query):
                    if len(row) < 2 or row[0] is None:
                        continue
                    member = person_id(row[1])
                    if member is not None:
                        out[str(row[0])] = member
        except (RagError, sa.exc.SQLAlchemyError) as exc:
            self.last_error = exc.message if isinstance(exc, RagError) else type(exc).__name__
            log.warning(
                "identity: subject_query failed (no token maps to a caller until it succeeds): %s",
                self.last_error,
            )
            return {}
        self.last_error = None
        return out


def claim(payload: dict[str, Any], path: str) -> Any:
    """The value at a claim path (``realm_access.roles``), or None."""
    value: Any = payload
    for part in path.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _claim_values(payload: dict[str, Any], path: str, check: Callable[[Any], str]) -> tuple[str, ...]:
    """A claim's values (a list, or one string); a value ``check`` refuses is no grant and is skipped."""
    raw = claim(payload, path)
    if raw is None:
        return ()
    values = raw if isinstance(raw, list) else [raw]
    out: dict[str, None] = {}
    for value in values:
        if isinstance(value, bool) or not isinstance(value, str | int):
            log.warning("identity: a value of claim %s is not text or a number and is skipped", path)
            continue
        try:
            out[check(value)] = None
        except (AccessError, InputError):
            log.warning("identity: a value of claim %s is not a role or group and is skipped", path)
    return tuple(out)


class JwtIdentity:
    """The ``[auth]`` declaration: verifies a token and builds its Caller (one per
    Engine: :func:`identity_for`)."""

    def __init__(
        self,
        settings: Settings,
        *,
        keys: KeySet | None = None,
        clock: Callable[[], float] = time.time,
        directory_clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not settings.auth_issuer or not settings.auth_audience:
            raise ValueError("no [auth] issuer declared")
        self.issuer, self.audience = settings.auth_issuer, settings.auth_audience
        self.algorithms = tuple(a.strip() for a in settings.auth_algorithms.split(","))
        self.leeway = duration_seconds(settings.auth_leeway) or 0.0
        self.id_claim = settings.auth_id_claim
        self.roles_claim, self.groups_claim = settings.auth_roles_claim, settings.auth_groups_claim
        self.prefer_token = settings.auth_prefer == "TOKEN"
        self.keys = keys or KeySet(
            url=settings.auth_jwks_url,
            path=settings.auth_jwks_file,
            refresh_s=duration_seconds(settings.auth_jwks_refresh) or 3600.0,
        )
        refresh = duration_seconds(settings.access_refresh) or 300.0
        self.subjects = (
            SubjectMap(settings.auth_subject_query, refresh, directory_clock)
            if settings.auth_subject_query
            else None
        )
        self.clock = clock

    # -- the token ---------------------------------------------------------------------
    def claims(self, token: str) -> dict[str, Any]:
        """The verified claims of ``token``, or InvalidTokenError saying why (for the log)."""
        if not looks_like_jwt(token):
            raise InvalidTokenError("not a JWT")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidTokenError("the token's header cannot be read") from None
        if "crit" in header or "b64" in header:  # RFC 7515 4.1.11: an extension not understood is refused
            raise InvalidTokenError("the token's header names critical extensions")
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise InvalidTokenError(
                f"algorithm {str(alg)[:16]!r} is not allowed (allowed: {', '.join(self.algorithms)})"
            )
        kid = header.get("kid")
        key = self.keys.key(kid if isinstance(kid, str) else None)
        if key.alg is not None and key.alg != alg:
            raise InvalidTokenError(f"the token's algorithm {alg} is not its key's ({key.alg[:16]})")
        try:
            payload: dict[str, Any] = jwt.decode(
                token,
                key=key.key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                options={
                    "require": ["exp", "iss", "aud"],
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except jwt.InvalidAudienceError:
            raise InvalidTokenError("the token's aud does not name this audience") from None
        except jwt.InvalidIssuerError:
            raise InvalidTokenError("the token's iss is not the issuer") from None
        except jwt.MissingRequiredClaimError as exc:
            raise InvalidTokenError(f"the token has no {exc.claim} claim") from None
        except jwt.InvalidSignatureError:
            raise InvalidTokenError("the signature does not verify") from None
        except (jwt.PyJWTError, ValueError, TypeError) as exc:
            raise InvalidTokenError(f"the token is not valid ({type(exc).__name__})") from None
        self._check_times(payload)
        return payload

    def _check_times(self, payload: dict[str, Any]) -> None:
        now = self.clock()
        exp, nbf = payload.get("exp"), payload.get("nbf")
        if isinstance(exp, bool) or not isinstance(exp, int | float):
            raise InvalidTokenError("exp is not a time")
        if exp <= now - self.leeway:
            raise InvalidTokenError("the token has expired")
        if nbf is not None:
            if isinstance(nbf, bool) or not isinstance(nbf, int | float):
                raise InvalidTokenError("nbf is not a time")
            if nbf > now + self.leeway:
                raise InvalidTokenError("the token is not valid yet (nbf)")

    # -- the caller --------------------------------------------------------------------
    def caller(self, conn: sa.Connection, engine: Engine, token: str) -> Caller:
        """The Caller a valid token names, as the deployment declares it (InvalidTokenError otherwise)."""
        payload = self.claims(token)
        raw = claim(payload, self.id_claim)
        if raw is None or isinstance(raw, dict | list | bool):
            raise InvalidTokenError(f"the token has no usable {self.id_claim} claim")
        if self.subjects is not None:
            employee_id = self.subjects.employee_id(engine.sa_engine, str(raw))
            if employee_id is None:
                raise InvalidTokenError(f"subject_query maps no employee to this token's {self.id_claim}")
        else:
            employee_id = person_id(raw)
            if employee_id is None or not ID_MIN <= employee_id <= ID_MAX:
                raise InvalidTokenError(
                    f"the token's {self.id_claim} is not an employee id (declare subject_query to map it)"
                )
        try:
            base = load_caller(conn, employee_id, engine)
        except NotFoundError:
            raise InvalidTokenError(f"employee {employee_id} not found") from None
        directory = directory_for(engine)
        roles, groups = base.roles, base.groups
        if self.roles_claim and (self.prefer_token or not directory.roles_declared(conn)):
            roles = _claim_values(payload, self.roles_claim, check_role)
        if self.groups_claim and (self.prefer_token or directory.groups_query is None):
            groups = _claim_values(payload, self.groups_claim, check_group)
        return Caller(employee_id, roles, groups, base.name, see_all_roles=base.see_all_roles)


_IDENTITIES: PerEngine[JwtIdentity] = PerEngine(lambda engine: JwtIdentity(engine.settings))


def identity_for(engine: Engine) -> JwtIdentity | None:
    """The deployment's ``[auth]`` declaration (one per Engine, so the key set is cached once), or None."""
    if not engine.settings.auth_issuer:
        return None
    return _IDENTITIES.get(engine)


def identity_status(engine: Engine) -> dict[str, Any]:
    """What ``oracle-rag status`` says about ``[auth]``: the issuer, the key set (read now if not yet)."""
    identity = identity_for(engine)
    if identity is None:
        return {"issuer": None}
    settings = engine.settings
    return {
        "issuer": identity.issuer,
        "audience": identity.audience,
        "key_set": settings.auth_jwks_url or settings.auth_jwks_file,
        "key_ids": identity.keys.key_ids(),
        "key_set_error": identity.keys.last_error,
        "subject_query_error": identity.subjects.last_error if identity.subjects else None,
    }


def caller_for_bearer(conn: sa.Connection, engine: Engine, token: str) -> Caller | None:
    """The Caller behind a bearer token: an API token, else a JWT when ``[auth]`` declares an issuer.

    None for any refusal; a JWT's reason is logged (never the token), and the
    answer is the same whatever the reason.
    """
    if looks_like_token(token):
        return caller_for_token(conn, engine, token)
    identity = identity_for(engine)
    if identity is None:
        return None
    try:
        return identity.caller(conn, engine, token)
    except InvalidTokenError as exc:
        log.warning("identity: bearer token refused: %s", exc.message)
        return None
