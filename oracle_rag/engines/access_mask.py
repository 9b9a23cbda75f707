"""The scope predicate in numpy: the in-process indexes' copy of ``engine_sql.SCOPE``.

The embedded engine's vector cache and term index pick candidates from
arrays before SQL re-checks them with the one predicate; their mask must let
through at least every row the predicate does (a row masked out here is
never re-checked), and should let through no more (a row SQL drops costs a
fallback to the SQL scan). So it is the same rule, over the same columns:

    see-all, or (source not failed, and (ACCESS_PUBLIC = 1 or ACCESS_OWNER =
    caller or one of the record's groups is the caller's))

Per slot: the access owner and the public flag as arrays, and the groups as
an inverted index (group -> slots), so a caller in 20 of 1,000 groups costs
20 lookups, not a scan of everybody's groups. Each group's slots are kept as
a set (cheap to change) and, once read, as an array until the group
next changes: turning the sets into arrays on every search cost ~4 ms at
100k chunks for a caller in 20 groups (bench/access_scope.py).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

import numpy as np

from oracle_rag.engines.records import Scope

NULL = np.iinfo(np.int64).min  # stands for SQL NULL in the id columns (vector_cache.NULL)


class AccessSlots:
    """The access columns of every slot of an in-process index."""

    def __init__(self) -> None:
        self.owner = np.full(0, NULL, dtype=np.int64)
        self.public = np.zeros(0, dtype=bool)
        self._members: dict[str, set[int]] = {}
        self._arrays: dict[str, np.ndarray] = {}  # a group's slots as an array, until the group changes
        self._groups_of: dict[int, tuple[str, ...]] = {}

    def grow(self, capacity: int) -> None:
        if capacity <= len(self.owner):
            return
        owner = np.full(capacity, NULL, dtype=np.int64)
        owner[: len(self.owner)] = self.owner
        public = np.zeros(capacity, dtype=bool)
        public[: len(self.public)] = self.public
        self.owner, self.public = owner, public

    @property
    def nbytes(self) -> int:
        return int(
            self.owner.nbytes
            + self.public.nbytes
            + 64 * len(self._groups_of)
            + sum(a.nbytes for a in self._arrays.values())
        )

    def set(self, slot: int, owner: int, public: Any, groups: Any) -> None:
        """Slot ``slot`` now holds a row with these access columns (ACCESS_GROUPS as stored: JSON or NULL)."""
        self.clear(slot)
        self.owner[slot] = owner
        self.public[slot] = bool(int(public or 0))
        if groups:
            members = tuple(str(g) for g in json.loads(groups))
            self._groups_of[slot] = members
            for g in members:
                self._members.setdefault(g, set()).add(slot)
                self._arrays.pop(g, None)

    def clear(self, slot: int) -> None:
        if slot < len(self.owner):
            self.owner[slot] = NULL
            self.public[slot] = False
        for g in self._groups_of.pop(slot, ()):
            self._arrays.pop(g, None)
            slots = self._members.get(g)
            if slots is not None:
                slots.discard(slot)
                if not slots:
                    del self._members[g]

    def _slots_of(self, group: str) -> np.ndarray:
        """The slots carrying ``group`` (an array built once per change of the group)."""
        idx = self._arrays.get(group)
        if idx is None:
            slots = self._members.get(group, ())
            idx = np.fromiter(slots, dtype=np.int64, count=len(slots))
            self._arrays[group] = idx
        return idx

    def visible(
        self, n: int, scope: Scope, types: np.ndarray, type_codes: Mapping[str, int], failed: Collection[str]
    ) -> np.ndarray:
        """The slots ``scope`` may read among the first ``n`` (see-all: all of them)."""
        if scope.see_all:
            return np.ones(n, dtype=bool)
        mask = self.public[:n] | (self.owner[:n] == scope.caller_id)
        parts = [self._slots_of(group) for group in set(scope.groups)]
        parts = [p for p in parts if len(p)]
        if parts:
            idx = parts[0] if len(parts) == 1 else np.concatenate(parts)
            mask[idx[idx < n]] = True
        if failed:
            codes = [type_codes[t] for t in failed if t in type_codes]
            if codes:
                mask &= ~np.isin(types[:n], np.asarray(codes, dtype=np.int32))
        return mask
