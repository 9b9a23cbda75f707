"""API tokens: create, verify, revoke. Only their SHA-256 is stored.

A token is ``orag_`` followed by 32 random bytes in URL-safe base64 (43
characters). The prefix makes a leaked token easy to recognise (secret
scanners, logs); the 256 random bits make guessing hopeless, which is also
why a plain SHA-256 (no salt, no slow hash) is the right digest here: the
database never holds anything that can be replayed, and a lookup by hash is
one indexed equality. The token is returned once, by :func:`create_token`,
and never again.

Verification happens in SQL against the database clock (revoked flag,
optional expiry), so every server agrees on when a token stops working.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from dataclasses import dataclass

import sqlalchemy as sa

from oracle_rag.callers import tokens_sql as q
from oracle_rag.callers.access import load_caller
from oracle_rag.callers.caller import Caller
from oracle_rag.engines import Engine
from oracle_rag.errors import InputError, NotFoundError
from oracle_rag.sources.base import iso_or_none

TOKEN_PREFIX = "orag_"
_TOKEN_SHAPE = re.compile(r"^orag_[A-Za-z0-9_-]{43}$")
MAX_EXPIRES_DAYS = 3650


@dataclass(frozen=True)
class IssuedToken:
    """A freshly created token: ``token`` is the only copy of the secret."""

    token_id: int
    employee_id: int
    token: str
    expires_days: float | None
    label: str | None


@dataclass(frozen=True)
class TokenInfo:
    """What the database knows about a token (never the token itself)."""

    token_id: int
    employee_id: int
    label: str | None
    created_at: str
    expires_at: str | None
    revoked: bool


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def looks_like_token(value: str) -> bool:
    """Cheap shape check before any database lookup."""
    return bool(_TOKEN_SHAPE.match(value))


def _check_expiry(expires_days: float | None) -> float | None:
    if expires_days is None:
        return None
    if isinstance(expires_days, bool) or not isinstance(expires_days, int | float):
        raise InputError("expires_days must be a number of days")
    if not 0 < expires_days <= MAX_EXPIRES_DAYS:
        raise InputError(f"expires_days must be in (0, {MAX_EXPIRES_DAYS}], got {expires_days}")
    return float(expires_days)


def create_token(
    engine: Engine,
    employee_id: int,
    *,
    expires_days: float | None = None,
    label: str | None = None,
    check_employee: bool = True,
) -> IssuedToken:
    """Issue a token for ``employee_id`` and store its hash.

    ``check_employee`` refuses an id that the reference EMPLOYEE table does
    not know (the built-in token loader resolves callers there); a host
    application resolving callers elsewhere passes False.
    """
    days = _check_expiry(expires_days)
    if label is not None and not 0 < len(label) <= 64:
        raise InputError("token label must be 1 to 64 characters")
    token = new_token()
    digest = hash_token(token)
    with engine.begin_exclusive() as conn:
        if check_employee:
            load_caller(conn, int(employee_id), engine)  # NotFoundError for an unknown employee
        conn.execute(
            engine.statement(q.INSERT_TOKEN),
            {"token_hash": digest, "employee_id": int(employee_id), "label": label, "expires_days": days},
        )
        token_id = conn.execute(engine.statement(q.TOKEN_BY_HASH), {"token_hash": digest}).one()[0]
    return IssuedToken(int(token_id), int(employee_id), token, days, label)


def verify_token(conn: sa.Connection, engine: Engine, token: str) -> int | None:
    """The employee id a valid token belongs to, or None (unknown, revoked, expired, malformed)."""
    if not isinstance(token, str) or not looks_like_token(token):
        return None
    row = conn.execute(engine.statement(q.VERIFY_TOKEN), {"token_hash": hash_token(token)}).first()
    return None if row is None else int(row[1])


def caller_for_token(conn: sa.Connection, engine: Engine, token: str) -> Caller | None:
    """The Caller behind a token: verified, then resolved in EMPLOYEE (None if either fails)."""
    employee_id = verify_token(conn, engine, token)
    if employee_id is None:
        return None
    try:
        return load_caller(conn, employee_id, engine)
    except NotFoundError:
        return None  # the employee was deleted after the token was issued


def revoke_token(engine: Engine, token_id: int) -> bool:
    """Revoke one token by id; False when no active token has that id."""
    with engine.begin_exclusive() as conn:
        return bool(conn.execute(engine.statement(q.REVOKE_TOKEN), {"token_id": int(token_id)}).rowcount)


def revoke_label(engine: Engine, label: str) -> int:
    """Revoke every active token carrying ``label`` (the demo re-issues its tokens this way)."""
    with engine.begin_exclusive() as conn:
        return int(conn.execute(engine.statement(q.REVOKE_LABEL), {"label": label}).rowcount or 0)


def list_tokens(engine: Engine, employee_id: int | None = None) -> list[TokenInfo]:
    with engine.connect() as conn:
        rows = conn.execute(
            engine.statement(q.LIST_TOKENS),
            {"employee_id": None if employee_id is None else int(employee_id)},
        ).fetchall()
    return [
        TokenInfo(int(r[0]), int(r[1]), r[2], iso_or_none(r[3]) or "", iso_or_none(r[4]), bool(r[5]))
        for r in rows
    ]


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization: Bearer <token>`` header, else None."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    value = value.strip()
    return value or None
