"""Per-connection SQLite limits and flags the Python binding does not expose.

``sqlean.py``'s Connection (a fork of the 3.10 stdlib module) has no
``setlimit``/``setconfig``, yet the guarded connection needs
``SQLITE_LIMIT_LENGTH`` (a doubling string must fail at ~1 MB, not grow to
gigabytes), ``SQLITE_LIMIT_ATTACHED = 0`` and ``SQLITE_DBCONFIG_DEFENSIVE``.
They are set through ``sqlite3_limit``/``sqlite3_db_config`` of the very
library the binding is linked with, on the connection's own ``sqlite3*``.

The handle is read from the Connection object (the first field after the
object header, as in CPython's ``_sqlite/connection.h``) and verified before
use: ``sqlite3_db_filename`` must return the file the connection opened, and
every limit is read back. Anything unexpected raises, so the guarded path
fails closed instead of running without its limits.
"""

from __future__ import annotations

import ctypes
import os
import sys
from functools import cache
from typing import Any

import sqlean

LIMIT_LENGTH = 0
LIMIT_SQL_LENGTH = 1
LIMIT_COLUMN = 2
LIMIT_EXPR_DEPTH = 3
LIMIT_COMPOUND_SELECT = 4
LIMIT_VDBE_OP = 5
LIMIT_FUNCTION_ARG = 6
LIMIT_ATTACHED = 7
LIMIT_LIKE_PATTERN_LENGTH = 8
LIMIT_VARIABLE_NUMBER = 9
LIMIT_TRIGGER_DEPTH = 10
LIMIT_WORKER_THREADS = 11

DBCONFIG_ENABLE_TRIGGER = 1003
DBCONFIG_ENABLE_LOAD_EXTENSION = 1005
DBCONFIG_DEFENSIVE = 1010
DBCONFIG_DQS_DML = 1013
DBCONFIG_DQS_DDL = 1014


class NativeError(RuntimeError):
    """The SQLite handle could not be reached or a limit did not take."""


@cache
def _library() -> ctypes.CDLL:
    lib = ctypes.CDLL(sqlean._sqlite3.__file__)
    lib.sqlite3_db_filename.restype = ctypes.c_char_p
    lib.sqlite3_db_filename.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.sqlite3_limit.restype = ctypes.c_int
    lib.sqlite3_limit.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.sqlite3_db_config.restype = ctypes.c_int
    return lib


def _handle(conn: Any, expected_file: str) -> int:
    if type(conn) is not sqlean.Connection:
        raise NativeError("not a sqlean connection")
    offset = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)  # PyObject_HEAD
    if hasattr(sys, "gettotalrefcount"):  # debug builds have two more pointers in the header
        offset += 2 * ctypes.sizeof(ctypes.c_void_p)
    db = ctypes.c_void_p.from_address(id(conn) + offset).value
    if not db:
        raise NativeError("the connection has no SQLite handle")
    name = _library().sqlite3_db_filename(db, b"main")
    if name is None or os.path.realpath(name.decode()) != os.path.realpath(expected_file):
        raise NativeError("the SQLite handle does not belong to this connection")
    return db


def harden(conn: Any, db_file: str, limits: dict[int, int]) -> None:
    """Apply ``limits`` and the defensive flags to ``conn`` (opened on ``db_file``), or raise."""
    lib = _library()
    db = _handle(conn, db_file)
    for limit, value in limits.items():
        lib.sqlite3_limit(db, limit, value)
        if lib.sqlite3_limit(db, limit, -1) != value:
            raise NativeError(f"SQLite limit {limit} did not take")
    for op, on in (
        (DBCONFIG_DEFENSIVE, 1),
        (DBCONFIG_DQS_DML, 0),
        (DBCONFIG_DQS_DDL, 0),
        (DBCONFIG_ENABLE_LOAD_EXTENSION, 0),
        (DBCONFIG_ENABLE_TRIGGER, 0),
    ):
        result = ctypes.c_int(-1)
        rc = lib.sqlite3_db_config(
            ctypes.c_void_p(db), ctypes.c_int(op), ctypes.c_int(on), ctypes.byref(result)
        )
        if rc != 0 or result.value != on:
            raise NativeError(f"SQLite configuration {op} did not take")
