"""The data directory (``data_dir``): made on first use, or refused with the reason.

Every embedded-engine command writes there first (the SQLite file, the
model), so a bad value must fail as one line naming the setting, not as an
``OSError`` traceback from ``mkdir``. The directory itself is created; its
parent is not, so a typo (``/srv/oracle-ragg/data``) does not silently grow
a new tree.
"""

from __future__ import annotations

from pathlib import Path

from .errors import ConfigurationError

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
                f"data_dir {path}: its parent {parent} does not exist; create it (mkdir -p {parent}) or {_HOW}",
                key="data_dir")
        try:
            path.mkdir(exist_ok=True)
        except OSError as exc:
            raise ConfigurationError(
                f"data_dir {path} cannot be created ({exc.strerror or type(exc).__name__}); {_HOW}",
                key="data_dir") from None
    # An existing directory is not checked further: a read-only one is a
    # fault to report at each use (SQLITE_CANTOPEN names it, docs/operations.md),
    # and it may be writable again a minute later.
    return path
