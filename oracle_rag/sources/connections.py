"""Where a SQL-query source reads from, and how a read is kept safe.

A source names a connection. The name is looked up, in order:

1. ``rag`` (or no ``connection`` at all): the product's own database, through
   the engine's own SQLAlchemy engine. ``url``/``user``/``password_env`` do
   not apply to it and are refused.
2. A binding made in code: ``bind_connection("crm", engine)`` with a
   SQLAlchemy ``Engine`` (or an oracle-rag ``Engine``). A binding wins over
   URL options; those are then ignored with a warning naming the keys.
3. The source's ``url`` (+ ``user`` + ``password_env``) options: an engine
   created here, with the password read from the named environment variable
   at connect time, never from configuration. SQLite URLs are opened with
   the ``sqlean`` module, the one SQLite binding the product loads.
4. Neither: CONFIGURATION naming the source.

Every read runs in :func:`read_session`: a read-only transaction where the
dialect has one, a statement time limit, a rollback at the end, and the
connection's settings put back even when a step fails (a connection whose
settings cannot be restored is invalidated, never returned to the pool).
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from oracle_rag.errors import ConfigurationError, SourceLoadingError, wrap_driver_error
from oracle_rag.sources import sql_query_sql as q
from oracle_rag.sources.durations import format_seconds
from oracle_rag.sources.options import Option
from oracle_rag.urlsafety import check_url

log = logging.getLogger(__name__)

RAG_CONNECTION = "rag"
# Another database to read from (part of a SQL-query source's schema, sql_query.SQL_SOURCE_OPTIONS).
URL_OPTIONS: tuple[Option, ...] = (
    Option(
        "url", "text", "another database to read from (below)", accepts="a SQLAlchemy URL without secrets"
    ),
    Option("user", "text", "the user to connect as", accepts="a user name"),
    Option(
        "password_env",
        "text",
        "the password, read from the environment when connecting",
        accepts="an environment variable name",
    ),
)
URL_KEYS = tuple(o.key for o in URL_OPTIONS)
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# SQLite's progress handler runs every N virtual-machine instructions; 1000 is
# well under a millisecond of work, so the time limit is checked often enough.
_PROGRESS_STEPS = 1000


def check_connection_name(name: Any, *, key: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            f"{key}: a connection name is a letter then letters, digits, '_', '.', '-' (<= 64 characters)",
            key=key,
        )
    return name


# -- bindings made in code ----------------------------------------------------------
_bindings: dict[str, ConnectionBinding] = {}
_lock = threading.Lock()


class ConnectionBinding:
    """A name bound to an engine; a context manager, closing it unbinds the name.

    Closing twice is a no-op, and closing a stale binding (after its name was
    bound again by someone else) leaves the newer binding alone.
    """

    def __init__(self, name: str, engine: sa.Engine) -> None:
        self.name = name
        self.engine = engine
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with _lock:
            if _bindings.get(self.name) is self:
                del _bindings[self.name]
            self._closed = True

    def __enter__(self) -> ConnectionBinding:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"ConnectionBinding({self.name!r}, dialect={self.engine.dialect.name!r}, closed={self._closed})"
        )


def bind_connection(name: str, engine: Any) -> ConnectionBinding:
    """Bind ``name`` to a SQLAlchemy ``Engine`` (or an oracle-rag ``Engine``) for SQL sources.

    Raises CONFIGURATION if the name is already bound (close that binding
    first) or is ``rag``, the product's own database.
    """
    check_connection_name(name, key="connection")
    if name == RAG_CONNECTION:
        raise ConfigurationError(
            f"connection name {RAG_CONNECTION!r} is reserved for the product's own database", key="connection"
        )
    sa_engine = _as_sa_engine(engine)
    if sa_engine.dialect.name == "sqlite" and not _is_sqlean(sa_engine):
        log.warning(
            "connection %r: a SQLite engine not created with module=sqlean loads a second SQLite "
            "library in this process; create it with sa.create_engine(url, module=sqlean)",
            name,
        )
    binding = ConnectionBinding(name, sa_engine)
    with _lock:
        if name in _bindings:
            raise ConfigurationError(
                f"connection {name!r} is already bound; close that binding first", key="connection"
            )
        _bindings[name] = binding
    return binding


def bound_engine(name: str) -> sa.Engine | None:
    with _lock:
        binding = _bindings.get(name)
    return None if binding is None else binding.engine


def _as_sa_engine(engine: Any) -> sa.Engine:
    if isinstance(engine, sa.Engine):
        return engine
    inner = getattr(engine, "sa_engine", None)
    if isinstance(inner, sa.Engine):
        return inner
    raise ConfigurationError(
        "bind_connection needs a SQLAlchemy Engine (for a driver pool, "
        "create_engine(url, creator=pool.acquire))",
        key="connection",
    )


def _is_sqlean(engine: sa.Engine) -> bool:
    module = getattr(engine.dialect, "dbapi", None) or getattr(engine.dialect, "loaded_dbapi", None)
    return bool(module is not None and getattr(module, "__name__", "").startswith("sqlean"))


# -- resolution -----------------------------------------------------------------------
@dataclass(frozen=True)
class UrlOptions:
    """A source's URL connection options; the password is only ever an env var's name."""

    url: str
    user: str | None = None
    password_env: str | None = None


def check_url_options(source: str, options: Mapping[str, Any]) -> UrlOptions | None:
    """Check ``url``/``user``/``password_env`` of ``source`` together (CONFIGURATION on any problem).

    ``options`` are the values as read (``read_options`` with :data:`URL_OPTIONS`: non-empty strings)."""
    given = {k: options[k] for k in URL_KEYS if options.get(k) is not None}
    if not given:
        return None
    prefix = f"sources.{source}"
    if "url" not in given:
        raise ConfigurationError(
            f"{prefix}: {', '.join(sorted(given))} given without url", key=f"{prefix}.url"
        )
    env = given.get("password_env")
    check_url(
        given["url"], key=f"{prefix}.url", password_env=env or "an environment variable named by password_env"
    )
    try:
        sa.engine.make_url(given["url"])
    except Exception:
        raise ConfigurationError(
            f"{prefix}.url: not a SQLAlchemy URL (dialect+driver://host/database)", key=f"{prefix}.url"
        ) from None
    if env is not None and not _ENV_NAME.match(env):
        raise ConfigurationError(
            f"{prefix}.password_env: expected an environment variable name", key=f"{prefix}.password_env"
        )
    return UrlOptions(given["url"], given.get("user"), env)


def create_url_engine(source: str, options: UrlOptions) -> sa.Engine:
    """An engine for a source's URL; the password comes from ``password_env`` now."""
    prefix = f"sources.{source}"
    url = sa.engine.make_url(options.url)
    if options.user:
        url = url.set(username=options.user)
    if options.password_env:
        password = os.environ.get(options.password_env)
        if not password:
            raise ConfigurationError(
                f"{prefix}.password_env: environment variable {options.password_env} is not set",
                key=f"{prefix}.password_env",
            )
        url = url.set(password=password)
    kwargs: dict[str, Any] = {"hide_parameters": True, "pool_pre_ping": True}
    if url.get_backend_name() == "sqlite":
        import sqlean  # the product's one SQLite binding; never the stdlib sqlite3 as well

        kwargs["module"] = sqlean
        kwargs["connect_args"] = {"check_same_thread": False}
        kwargs.pop("pool_pre_ping")
    try:
        return sa.create_engine(url, **kwargs)
    except Exception as exc:  # missing driver, bad option: the text may echo the URL
        raise ConfigurationError(
            f"{prefix}.url: cannot create an engine for dialect {url.get_backend_name()!r} "
            f"[{type(exc).__name__}]; is its driver installed?",
            key=f"{prefix}.url",
        ) from None


class ConnectionResolver:
    """Finds the engine of each source; owns (and disposes) the engines it creates from URLs."""

    def __init__(self, rag_engine: sa.Engine | None = None) -> None:
        self._rag_engine = rag_engine
        self._created: dict[str, sa.Engine] = {}
        self._warned: set[str] = set()
        self._lock = threading.Lock()

    def engine_for(self, source: str, connection: str, url_options: UrlOptions | None) -> sa.Engine:
        if connection == RAG_CONNECTION:
            if self._rag_engine is None:
                raise ConfigurationError(
                    f"source {source!r}: no product database to read from", key=f"sources.{source}.connection"
                )
            return self._rag_engine
        bound = bound_engine(connection)
        if bound is not None:
            if url_options is not None and source not in self._warned:
                self._warned.add(source)
                keys = [
                    k
                    for k, v in (
                        ("url", url_options.url),
                        ("user", url_options.user),
                        ("password_env", url_options.password_env),
                    )
                    if v
                ]
                log.warning(
                    "source %r: connection %r is bound in code; ignoring option(s) %s",
                    source,
                    connection,
                    ", ".join(keys),
                )
            return bound
        if url_options is None:
            raise ConfigurationError(
                f"source {source!r}: connection {connection!r} is neither bound in code "
                f"(bind_connection) nor given by a url option",
                key=f"sources.{source}.connection",
            )
        with self._lock:
            engine = self._created.get(source)
            if engine is None:
                engine = create_url_engine(source, url_options)
                self._created[source] = engine
            return engine

    def close(self) -> None:
        with self._lock:
            engines, self._created = list(self._created.values()), {}
        for engine in engines:
            engine.dispose()


# -- the read session -----------------------------------------------------------------
class StatementTimeout(SourceLoadingError):
    """The source's query ran past its statement timeout."""


@contextmanager
def read_session(engine: sa.Engine, *, source: str, timeout_s: float) -> Iterator[sa.Connection]:
    """A connection inside a read-only, time-limited transaction that is always rolled back.

    * SQLite: ``PRAGMA query_only = ON`` and a progress handler that aborts
      the statement at the deadline, both on the raw connection and both put
      back afterwards (the previous ``query_only`` value is restored).
    * Oracle: ``SET TRANSACTION READ ONLY`` first in the transaction and the
      connection's ``call_timeout`` (per round trip), restored afterwards.
    * PostgreSQL: ``SET TRANSACTION READ ONLY`` and a transaction-local
      ``statement_timeout``; MySQL/MariaDB: ``SET TRANSACTION READ ONLY``.
    * Any other dialect: only the rollback (logged once per source).
    """
    try:
        conn = engine.connect()
    except sa.exc.DBAPIError as exc:
        raise wrap_driver_error(exc, f"source {source!r}: connecting") from None
    deadline = time.monotonic() + timeout_s
    fired = threading.Event()
    restore: list[Any] = []
    try:
        try:
            _enter(conn, source, timeout_s, deadline, fired, restore)
            yield conn
        except sa.exc.DBAPIError as exc:
            if fired.is_set():
                raise StatementTimeout(
                    f"source {source!r}: the query ran longer than its statement_timeout "
                    f"({format_seconds(timeout_s)})"
                ) from None
            raise wrap_driver_error(exc, f"source {source!r}: reading") from None
        finally:
            try:
                if conn.in_transaction():
                    conn.rollback()
            finally:
                _restore(conn, source, restore)
    finally:
        conn.close()


def _enter(
    conn: sa.Connection,
    source: str,
    timeout_s: float,
    deadline: float,
    fired: threading.Event,
    restore: list[Any],
) -> None:
    dialect = conn.dialect.name
    if dialect == "sqlite":
        raw = conn.connection.dbapi_connection
        cur = raw.cursor()  # type: ignore[union-attr]
        try:
            previous = cur.execute(q.SQLITE_QUERY_ONLY_GET).fetchone()[0]
            cur.execute(q.SQLITE_QUERY_ONLY_ON)
        finally:
            cur.close()
        restore.append(("sqlite_query_only", bool(previous)))

        def progress() -> int:
            if time.monotonic() > deadline:
                fired.set()
                return 1
            return 0

        raw.set_progress_handler(progress, _PROGRESS_STEPS)  # type: ignore[union-attr]
        restore.append(("sqlite_progress", None))
        conn.begin()
        return
    if dialect == "oracle":
        raw = conn.connection.driver_connection
        restore.append(("oracle_call_timeout", raw.call_timeout))  # type: ignore[union-attr]
        raw.call_timeout = max(1, int(timeout_s * 1000))  # type: ignore[union-attr]
    conn.begin()
    statements = q.READ_SESSION.get(dialect)
    if statements is None:
        _warn_best_effort(source, dialect)
        return
    for sql in statements:
        binds = {"timeout_ms": str(int(timeout_s * 1000))} if ":timeout_ms" in sql else {}
        conn.execute(sa.text(sql), binds)


_best_effort_warned: set[tuple[str, str]] = set()


def _warn_best_effort(source: str, dialect: str) -> None:
    if (source, dialect) not in _best_effort_warned:
        _best_effort_warned.add((source, dialect))
        log.warning(
            "source %r: dialect %r has no read-only transaction or statement timeout support here; "
            "the read runs in a transaction that is rolled back",
            source,
            dialect,
        )


def _restore(conn: sa.Connection, source: str, restore: list[Any]) -> None:
    """Put the connection's settings back; invalidate it if that fails."""
    if not restore:
        return
    try:
        for kind, value in reversed(restore):
            if kind == "sqlite_progress":
                raw = conn.connection.dbapi_connection
                raw.set_progress_handler(None, _PROGRESS_STEPS)  # type: ignore[union-attr]
            elif kind == "sqlite_query_only":
                cur = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
                try:
                    cur.execute(q.SQLITE_QUERY_ONLY_ON if value else q.SQLITE_QUERY_ONLY_OFF)
                finally:
                    cur.close()
            elif kind == "oracle_call_timeout":
                conn.connection.driver_connection.call_timeout = value  # type: ignore[union-attr]
    except Exception:
        log.warning(
            "source %r: could not restore the connection's settings; discarding the connection", source
        )
        conn.invalidate()
