"""The data directory (``data_dir``): made on first use, or refused with the reason.

Every embedded-engine command writes there first (the SQLite file, the
model), so a bad value must fail as one line naming the setting, not as an
``OSError`` traceback from ``mkdir``. The directory itself is created; its
parent is not, so a typo (``/srv/oracle-ragg/data``) does not silently grow
a new tree.

A relative ``data_dir`` (the default ``.oracle-rag``) is relative to the
working directory, and a desktop MCP client starts ``oracle-rag mcp`` in a
directory of its own choosing: so only the commands that create a database
(``migrate``, ``bootstrap``, ``demo``) may start from an empty directory;
the others first :func:`require_database` and fail in one line naming the
absolute path, and the long-running ones print :func:`describe_data_dir`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from oracle_rag.errors import ConfigurationError

if TYPE_CHECKING:
    from oracle_rag.config import Settings

_HOW = "set ORACLE_RAG_DATA_DIR (or data_dir in the config file) to a writable directory"


def prepare_data_dir(path: Path) -> Path:
    """Create ``path`` if missing (not its parents), or say why it cannot be; return it."""
    path = Path(path)
    if path.exists() and not path.is_dir():
        raise ConfigurationError(f"data_dir {path} is a file, not a directory; {_HOW}", key="data_dir")
    if not path.exists():
        parent = path.absolute().parent
        if not parent.is_dir():
            raise ConfigurationError(
                f"data_dir {path}: its parent {parent} does not exist; create it (mkdir -p {parent}) "
                f"or {_HOW}",
                key="data_dir",
            )
        try:
            path.mkdir(exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(
                f"data_dir {path} cannot be created ({exc.strerror or type(exc).__name__}); {_HOW}",
                key="data_dir",
            ) from None
    # An existing directory is not checked further: a read-only one is a
    # fault to report at each use (SQLITE_CANTOPEN names it, docs/operations.md),
    # and it may be writable again a minute later.
    return path


# SQLite's file header (https://sqlite.org/fileformat.html): 100 bytes, the schema cookie
# at offset 40 counts schema changes, so 0 means no table was ever created in the file.
_SQLITE_MAGIC = b"SQLite format 3\x00"
_SCHEMA_COOKIE = slice(40, 44)


def describe_data_dir(data_dir: str) -> str:
    """``data_dir /abs/path``, plus, for a relative setting, that it is relative to the working directory."""
    path = Path(data_dir)
    if path.is_absolute():
        return f"data_dir {path}"
    return f"data_dir {path.absolute()} (the setting {data_dir!r} is relative to the working directory)"


def _never_had_tables(db_file: Path) -> bool:
    """True for an empty file, or one whose header says no schema was ever written (and no WAL holds one)."""
    try:
        with db_file.open("rb") as f:
            header = f.read(100)
    except OSError:
        return False  # unreadable: the engine reports it with its own error code
    if not header:
        return True
    if len(header) < 100 or not header.startswith(_SQLITE_MAGIC):
        return False  # not ours to judge: the engine says what is wrong with it
    wal = db_file.with_name(db_file.name + "-wal")
    if wal.is_file() and wal.stat().st_size > 0:
        return False  # a running writer may hold the schema in the WAL, not yet in the file
    return int.from_bytes(header[_SCHEMA_COOKIE], "big") == 0


def data_dir_line(settings: Settings) -> str | None:
    """What long-running commands print at start: :func:`describe_data_dir`, ``None`` on Oracle
    (no data_dir)."""
    return None if settings.database_url else describe_data_dir(settings.data_dir)


def require_database(settings: Settings) -> None:
    """On the embedded engine, refuse in one line, creating nothing, a missing database or one with no schema.

    For the commands that read an existing database (``mcp``, ``serve``,
    ``ask``, ``search``, ``token``...): without it they would create an
    empty ``data_dir`` wherever they were started and fail later with a
    driver error.
    """
    if settings.database_url:
        return  # Oracle: the connection says what is wrong
    where, db_file = describe_data_dir(settings.data_dir), settings.sqlite_path
    fix = (
        "run `oracle-rag demo` or `oracle-rag migrate` there first, or set ORACLE_RAG_DATA_DIR "
        "(or data_dir in the config file) to the absolute path of the directory that holds oracle-rag.db"
    )
    if not db_file.is_file():
        raise ConfigurationError(f"no database: {db_file.name} is not in {where}; {fix}", key="data_dir")
    if _never_had_tables(db_file):
        raise ConfigurationError(
            f"no database: {db_file.name} in {where} is empty (no schema); {fix}", key="data_dir"
        )
