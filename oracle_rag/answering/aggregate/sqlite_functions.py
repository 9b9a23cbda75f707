"""Linear-time stand-ins for SQLite's quadratic string functions, on the guarded connection only.

Why: a built-in function call is one step of SQLite's virtual machine, and
neither the progress handler nor ``interrupt()`` can stop a step midway. With
values under the 1 MB cap (``sqlite_executor.VALUE_LIMIT``) SQLite's own

* ``trim(X, Y)``, ``ltrim(X, Y)``, ``rtrim(X, Y)`` compare each character of
  X with each character of Y (``len(X) * len(Y)``),
* ``replace(X, Y, Z)`` and ``instr(X, Y)`` compare Y at every offset of X,

so one call built by a recursive CTE ran for minutes at a 1 s timeout
(``bench/aggregate_cost.py`` measures it). The versions here give
the same answers in time linear in their input, and ``register`` installs
them on a connection under the same names (an application-defined function
overrides a built-in of the same name and arity on that connection only), so
the authorizer still sees ``trim``, ``replace``, ``instr``.

``LIKE`` and ``GLOB`` cost ``len(X) * len(pattern)`` and are bounded instead by
``SQLITE_LIMIT_LIKE_PATTERN_LENGTH`` (``LIKE_PATTERN_LIMIT`` bytes).

Values as SQLite reads them: NULL gives NULL; a number is read as its text,
rendered by SQLite itself; a BLOB is read as UTF-8 text (``instr`` of two
BLOBs searches bytes, as SQLite's does). A ``replace`` whose result would
exceed the value cap is refused before it is built. One difference: the
Python binding (``sqlean.py``, a fork of the 3.10 stdlib module) returns a
function's text only up to its first NUL character.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import sqlean

LIKE_PATTERN_LIMIT = 100  # bytes; ~0.1 s of CPU for one LIKE over a 1 MB value (docs/aggregates.md)
_STRIP_IN_C = 32  # a set of at most this many characters is stripped by str.strip (cost len(X) * set size)


_helper = threading.local()


def _number_text(value: int | float) -> str:
    """A number as SQLite renders it in a text context (its float format is not Python's)."""
    conn = getattr(_helper, "conn", None)
    if conn is None:
        conn = _helper.conn = sqlean.connect(":memory:", check_same_thread=True)
    return str(conn.execute("SELECT CAST(? AS TEXT)", (value,)).fetchone()[0])


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return _number_text(value)


def _trim_span(text: str, chars: str, left: bool, right: bool) -> str:
    members = frozenset(chars)
    if len(members) <= _STRIP_IN_C:
        unique = "".join(members)
        if left and right:
            return text.strip(unique)
        return text.lstrip(unique) if left else text.rstrip(unique)
    start, end = 0, len(text)
    if left:
        while start < end and text[start] in members:
            start += 1
    if right:
        while end > start and text[end - 1] in members:
            end -= 1
    return text[start:end]


def _trim(left: bool, right: bool) -> Callable[[Any, Any], str | None]:
    def trim(value: Any, chars: Any) -> str | None:
        text, charset = _text(value), _text(chars)
        if text is None or charset is None:
            return None
        return _trim_span(text, charset, left, right)

    return trim


def _replace(limit: int, refused: list[str]) -> Callable[[Any, Any, Any], str | None]:
    def replace(value: Any, pattern: Any, replacement: Any) -> str | None:
        text, find = _text(value), _text(pattern)
        if text is None or find is None:
            return None
        if (
            not find or find[0] == "\x00"
        ):  # SQLite returns X for an empty pattern (its test is the first byte)
            return text
        new = _text(replacement)
        if new is None:
            return None
        if len(new) > len(find) and len(text) + text.count(find) * (len(new) - len(find)) > limit:
            refused.append(f"replace() would build a value over {limit:,} characters")
            raise ValueError(refused[-1])  # SQLite reports "user-defined function raised exception"
        return text.replace(find, new)

    return replace


def _instr(haystack: Any, needle: Any) -> int | None:
    if haystack is None or needle is None:
        return None
    if isinstance(haystack, bytes) and isinstance(needle, bytes):
        return haystack.find(needle) + 1
    text, find = _text(haystack), _text(needle)
    assert text is not None and find is not None
    return text.find(find) + 1


def register(conn: Any, value_limit: int) -> list[str]:
    """Install the linear versions on ``conn`` (the two-argument trims, replace, instr).

    Returns the list where a call refused for size says why (SQLite passes
    on only that a function raised).
    """
    refused: list[str] = []
    for name, left, right in (("trim", True, True), ("ltrim", True, False), ("rtrim", False, True)):
        conn.create_function(name, 2, _trim(left, right), deterministic=True)
    conn.create_function("replace", 3, _replace(value_limit, refused), deterministic=True)
    conn.create_function("instr", 2, _instr, deterministic=True)
    return refused
