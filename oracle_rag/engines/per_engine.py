"""One object per Engine for as long as that engine lives: the process-wide registries of the parts
built on an engine (the names of its people, its callers' directory, its audit trail, its identity
provider's key set).

The registry is a WeakKeyDictionary keyed by the engine, so an engine its owner dropped is freed
together with what was built for it. The value must not hold the engine strongly (hold a weak
reference, or only the engine's settings): a value that did would keep its own key, and with it the
engine, its model session and caches, alive for the life of the process.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Generic, TypeVar

from oracle_rag.engines.base import Engine

T = TypeVar("T")


class PerEngine(Generic[T]):
    """``make(engine)`` once per engine, on first use; thread-safe."""

    def __init__(self, make: Callable[[Engine], T]) -> None:
        self._make = make
        self._items: weakref.WeakKeyDictionary[Engine, T] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()

    def get(self, engine: Engine) -> T:
        with self._lock:
            found = self._items.get(engine)
            if found is None:
                found = self._items[engine] = self._make(engine)
            return found

    def peek(self, engine: Engine) -> T | None:
        """The object built for ``engine``, or None when nothing asked for it yet (builds nothing)."""
        return self._items.get(engine)
