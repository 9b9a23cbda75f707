"""One error hierarchy for oracle-rag.

Every error carries a stable ``code`` so that the CLI can map it to an exit
status, the web layer to an HTTP status, and operators can grep logs for it.
Messages never carry secrets: driver errors are wrapped with only their class
name and vendor error code (see :func:`wrap_driver_error`), because an
Oracle or SQLAlchemy message may echo the DSN, the user or the password.
"""

from __future__ import annotations

import re
from typing import Any


class RagError(Exception):
    """Base class: ``code`` is stable, ``str(err)`` is safe to show."""

    code = "RAG"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = details

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class ConfigurationError(RagError):
    """Bad or missing configuration: names the key and what is allowed."""

    code = "CONFIGURATION"


class DatabaseError(RagError):
    """The database refused or failed; carries only the driver class and code."""

    code = "DATABASE"

    def __init__(
        self,
        message: str,
        *,
        driver_class: str | None = None,
        vendor_code: str | None = None,
        **details: Any,
    ) -> None:
        super().__init__(message, **details)
        self.driver_class = driver_class
        self.vendor_code = vendor_code


class MissingTableError(DatabaseError):
    """A statement named a table or view the database does not have (SQLite "no such table", ORA-00942).

    Not a connection failure: the database answered. The driver's text is
    dropped as for any driver error (a name in it came from a statement), so
    the part that knows which tables it needs says which and what to run
    (``oracle-rag migrate``, ``oracle-rag demo seed``, the source to fix).
    """

    code = "MISSING_TABLE"


class MigrationError(RagError):
    """A migration could not be applied, or an applied one was changed."""

    code = "MIGRATION"


class SourceLoadingError(RagError):
    """A source could not load or render an entity or a row."""

    code = "SOURCE_LOADING"


class EmbeddingError(RagError):
    """The embedding model is missing, broken, or returned a bad vector."""

    code = "EMBEDDING"


class AccessError(RagError):
    """No caller, or the caller may not see what was asked for."""

    code = "ACCESS"


class InvalidTokenError(AccessError):
    """A bearer token that is refused: bad signature, expired, wrong issuer or audience, unknown caller.

    The message is the reason, for the server's log only: every refusal
    answers the same 401, so a caller learns nothing about why.
    """

    code = "INVALID_TOKEN"


class NotFoundError(RagError):
    """The thing asked for does not exist for this caller."""

    code = "NOT_FOUND"


class GuardrailError(RagError):
    """Untrusted SQL was refused or contained by the guarded path."""

    code = "GUARDRAIL"


class LLMError(RagError):
    """The language model endpoint failed, timed out or refused."""

    code = "LLM"


class RateLimitError(RagError):
    """A caller sent more requests of one kind than the limit allows; ``retry_after`` in seconds."""

    code = "RATE_LIMITED"


class InputError(RagError):
    """Bad input from a caller (a query, a request body, a CLI argument)."""

    code = "INPUT"


_ORA_CODE = re.compile(r"\b((?:ORA|DPY|DPI)-\d{4,5})\b")


def driver_error_code(exc: BaseException) -> str | None:
    """Return the vendor error code (ORA-xxxxx, DPY-xxxx, SQLite code name) if any."""
    orig = getattr(exc, "orig", None) or exc
    for attr in ("full_code",):
        value = getattr(getattr(orig, "args", [None])[0] if getattr(orig, "args", None) else None, attr, None)
        if value:
            return str(value)
    match = _ORA_CODE.search(str(orig))
    if match:
        return match.group(1)
    name = getattr(orig, "sqlite_errorname", None)
    if name:
        return str(name)
    return None


# What an operator should read into an embedded-engine error code. The
# driver's message is dropped (it may quote SQL and binds), so these fixed
# texts are how a read-only file system or a full disk is named in the
# one-line error. Matched by prefix (SQLITE_IOERR_WRITE, SQLITE_READONLY_DBMOVED...).
_SQLITE_HINTS = (
    (
        "SQLITE_CANTOPEN",
        "cannot open the database file: missing, not permitted, or on a read-only file system",
    ),
    ("SQLITE_READONLY", "the database is read-only"),
    ("SQLITE_FULL", "the disk is full"),
    ("SQLITE_IOERR", "disk I/O error (a full or failing disk)"),
    ("SQLITE_BUSY", "the database is locked by another writer"),
    ("SQLITE_CORRUPT", "the database file is corrupt"),
    ("SQLITE_NOTADB", "the file is not a SQLite database"),
)


def driver_error_hint(code: str | None) -> str | None:
    """A fixed, safe explanation of a vendor code, when we have one."""
    for prefix, hint in _SQLITE_HINTS:
        if code and code.startswith(prefix):
            return hint
    return None


def missing_table(exc: BaseException) -> bool:
    """Whether the driver says a table or view does not exist (SQLite "no such table", ORA-00942)."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig)
    return text.startswith("no such table") or driver_error_code(exc) == "ORA-00942" or "ORA-00942:" in text


def wrap_driver_error(exc: BaseException, doing: str) -> DatabaseError:
    """Turn a driver/SQLAlchemy exception into a DatabaseError without its text.

    ``doing`` is our own description of the step ("connecting", "picking queue
    rows"). The driver's message is dropped because it may contain a host,
    user name or password; the class and ORA-/DPY- code are kept so an
    operator can still look the failure up.
    """
    orig = getattr(exc, "orig", None) or exc
    cls = type(orig).__name__
    code = driver_error_code(exc)
    suffix = f" [{cls}{', ' + code if code else ''}]"
    if missing_table(exc):
        return MissingTableError(
            f"{doing} failed: a table or view it reads does not exist (the database "
            f"answered; nothing is wrong with the connection){suffix}",
            driver_class=cls,
            vendor_code=code,
        )
    hint = driver_error_hint(code)
    if hint:
        suffix += f": {hint}"
    return DatabaseError(f"{doing} failed{suffix}", driver_class=cls, vendor_code=code)
