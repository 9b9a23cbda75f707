"""What crosses the engine seam: queue rows, chunks to write, scope, filters, where, hits.

Plain dataclasses and the row mapping both engines share, with no engine in
them, so the engine-free parts (indexer, worker, retriever, caller) import
them without importing an engine.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np

from oracle_rag.engines.indexed_columns import INDEXED_COLUMNS, INDEXED_FACETS, NO_VALUES
from oracle_rag.errors import InputError
from oracle_rag.text.bm25 import Analysis

ACTIONS = ("UPSERT", "DELETE")


@dataclass(frozen=True)
class QueueRow:
    """One row of RAG_DIRTY as a worker sees it."""

    dirty_id: int
    source_type: str
    source_id: str
    action: str
    attempts: int
    enqueued_at: Any = None
    last_error: str | None = None


def facets_json(facets: Mapping[str, Any] | None) -> str:
    """A record's facets as the canonical JSON text both engines store (sorted keys, compact).

    Facets are a flat object: each value a string, number, boolean or null
    (a date goes in as ISO text). Canonical text makes "facets unchanged"
    a plain string comparison for the indexer's skip test, so a number has
    one form whatever way it arrives (:func:`canonical_number`): the source's
    ``2.0`` and the ``Decimal('2')`` Oracle's native JSON reads back are
    both written ``2``; otherwise a float facet would never compare equal
    and its record would be re-scoped on every run.
    """
    if not facets:
        return "{}"
    out: dict[str, Any] = {}
    for key, value in facets.items():
        if not isinstance(key, str) or not key:
            raise InputError(f"facet names must be non-empty strings, got {key!r}")
        if value is not None and not isinstance(value, str | int | float | bool | Decimal):
            raise InputError(
                f"facet {key!r}: a flat value (text, number, boolean, null) is needed, "
                f"got {type(value).__name__}"
            )
        out[key] = canonical_number(value)
    try:
        return json.dumps(out, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except ValueError:
        raise InputError("facet numbers must be finite (no NaN or infinity)") from None


def canonical_number(value: Any) -> Any:
    """A facet number in its one stored form: integral values as int, the others as float.

    Booleans and non-numbers pass unchanged. JSON does not tell 2 from 2.0,
    and neither does Oracle's JSON type (it reads both back as ``Decimal('2')``).
    """
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return value
    if isinstance(value, int):
        return value
    if not math.isfinite(value):
        return float(value)  # refused by json.dumps(allow_nan=False)
    integral = value == value.to_integral_value() if isinstance(value, Decimal) else value.is_integer()
    return int(value) if integral else float(value)


def facets_value(raw: Any) -> dict[str, Any]:
    """FACETS as read back: SQLite gives JSON text, Oracle a dict (native JSON); NULL reads as {}."""
    if raw is None or raw == "{}":
        return {}
    if not isinstance(raw, dict):
        raw = read_lob(raw)
        raw = json.loads(raw if isinstance(raw, str) else bytes(raw).decode("utf-8"))
        if not isinstance(raw, dict):
            return {}
    # Oracle's JSON numbers may arrive as Decimal: back to the canonical int/float facets_json writes.
    return {k: canonical_number(v) for k, v in raw.items()}


_GROUP_MAX = 200
# The principal the scope predicate pads its group list with: never a stored group
# (check_group refuses control characters), so it matches nothing.
NO_GROUP = "\x00"


def check_group(value: Any) -> str:
    """A group (principal) as stored and bound: text of 1..200 characters, no control characters.

    Numbers are accepted and kept as their decimal text, so a team id read
    from an ``INTEGER`` column and the same id in a groups query agree.
    """
    if isinstance(value, bool) or value is None:
        raise InputError(f"a group must be text or a number, got {value!r}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, Decimal):
        value = int(value) if value == int(value) else value
    text = str(value).strip()
    if not text or len(text) > _GROUP_MAX or any(ord(ch) < 32 for ch in text):
        raise InputError("a group must be 1 to 200 characters without control characters")
    return text


@dataclass(frozen=True)
class RecordAccess:
    """Who may read a record: the access columns of its chunks (sources/access.py decides them).

    ``owner``: the employee the owner rule lets in; ``public``: everyone;
    ``groups``: members of any of these (sorted, RAG_CHUNK_ACL rows).
    """

    owner: int | None = None
    public: bool = False
    groups: tuple[str, ...] = ()

    @classmethod
    def legacy(cls, owner_id: int | None) -> RecordAccess:
        """A source that declares no policy: its owner, everyone when it has none."""
        return cls(owner=owner_id, public=owner_id is None)

    @property
    def groups_json(self) -> str | None:
        return (
            json.dumps(list(self.groups), ensure_ascii=False, separators=(",", ":")) if self.groups else None
        )

    @classmethod
    def stored(cls, owner: Any, public: Any, groups: Any) -> RecordAccess:
        """The columns as read back (ACCESS_OWNER, ACCESS_PUBLIC, ACCESS_GROUPS)."""
        raw = read_lob(groups)
        members = tuple(str(g) for g in json.loads(raw)) if raw else ()
        return cls(None if owner is None else int(owner), bool(int(public or 0)), members)


@dataclass(frozen=True)
class StoredRecord:
    """A record's stored state (its chunk 0): what the indexer compares before writing."""

    content_hash: str
    owner_id: int | None
    indexed: tuple[int | None, ...]  # the indexed facet columns (engines/indexed_columns.py)
    facets: str
    analysed: bool  # TERM_COUNT is set (rows from before the BM25 migration are not)
    access: RecordAccess = RecordAccess()

    @property
    def scope(self) -> tuple[int | None, tuple[int | None, ...], str, RecordAccess]:
        return (self.owner_id, self.indexed, self.facets, self.access)


@dataclass(frozen=True)
class ChunkWrite:
    """A chunk to store: the indexer fills it, the engine embeds and upserts it.

    ``chunk_no`` is the chunk's position in its record (0-based); every chunk
    of a record carries the record's scope columns, its indexed facet columns'
    values (``indexed``, in :data:`INDEXED_COLUMNS` order) and ``facets``
    (canonical JSON text, see :func:`facets_json`).
    """

    source_type: str
    source_id: str
    content: str
    content_hash: str
    owner_id: int | None = None
    indexed: tuple[int | None, ...] = NO_VALUES
    chunk_no: int = 0
    facets: str = "{}"
    # Chunk 0 of a record carries the record's BM25 analysis (bm25.analyze_record).
    analysis: Analysis | None = None
    # Who may read it; None: the rule of a source without a policy (RecordAccess.legacy).
    access: RecordAccess | None = None

    @property
    def record_access(self) -> RecordAccess:
        return self.access if self.access is not None else RecordAccess.legacy(self.owner_id)

    @property
    def embed_text(self) -> str:
        return embed_text(self.content)


def padded_groups(groups: Sequence[str]) -> list[str]:
    """The caller's groups as the ``:access_groups`` list, padded to a power of two (at least 4).

    The list is an expanding bind, so its length is part of the statement
    text; padding (with :data:`NO_GROUP`, which matches nothing) keeps the
    number of distinct texts per statement to a handful (4, 8, 16, ...), so
    Oracle shares cursors and SQLAlchemy's compiled cache stays small.
    """
    out = list(dict.fromkeys(groups))
    size = 4
    while size < len(out):
        size *= 2
    return out + [NO_GROUP] * (size - len(out))


@dataclass(frozen=True)
class Scope:
    """What a caller may read: everything (see-all), or what the access columns give them.

    ``groups`` are the caller's groups (principals). The predicate that reads
    it is ``engine_sql.SCOPE``; the in-process caches apply the same rule
    (engines/access_mask.py).
    """

    caller_id: int
    see_all: bool
    groups: tuple[str, ...] = ()

    def binds(self) -> dict[str, Any]:
        return {
            "see_all": 1 if self.see_all else 0,
            "caller_id": self.caller_id,
            "access_groups": padded_groups(self.groups),
        }


@dataclass(frozen=True, init=False)
class Filters:
    """Optional narrowing applied in SQL next to the scope predicate.

    ``facets``: facet name -> the value a record must have, for the facets
    the chunk table holds in an indexed column (engines/indexed_columns.py:
    the reference sources' project and sprint), given as keywords or as a
    mapping: ``Filters(project_id=1)`` is ``Filters(facets={"project_id": 1})``.
    ``None`` is no filter; another facet name is an :class:`InputError`
    (an answer narrows by any facet with a :class:`Where` instead).

    ``first_chunk`` keeps each record's first chunk only (``CHUNK_NO = 0``):
    semantic search then ranks a record by the window a single-vector
    retriever embeds (the model's first 256 wordpieces), which is what
    hybrid's semantic leg fuses (search/hybrid.py). Keyword search already ranks
    whole records through their chunk 0, so it changes nothing there.
    """

    facets: tuple[tuple[str, Any], ...]  # (facet, value), in INDEXED_COLUMNS order, None left out
    source_types: tuple[str, ...]
    first_chunk: bool

    def __init__(
        self,
        *,
        source_types: tuple[str, ...] = (),
        first_chunk: bool = False,
        facets: Mapping[str, Any] | Iterable[tuple[str, Any]] = (),
        **named: Any,
    ) -> None:
        given = {**dict(facets), **named}
        unknown = sorted(set(given) - set(INDEXED_FACETS))
        if unknown:
            raise InputError(
                f"a search filters by an indexed facet ({', '.join(INDEXED_FACETS)}), not {unknown[0]!r}"
            )
        pairs = tuple((f, given[f]) for f in INDEXED_FACETS if given.get(f) is not None)
        object.__setattr__(self, "facets", pairs)
        object.__setattr__(self, "source_types", source_types)
        object.__setattr__(self, "first_chunk", first_chunk)

    @property
    def indexed(self) -> tuple[Any, ...]:
        """The value each indexed column must have (None: any), in INDEXED_COLUMNS order."""
        values = dict(self.facets)
        return tuple(values.get(f) for f in INDEXED_FACETS)

    def binds(self) -> dict[str, Any]:
        return {
            **{c.filter_bind: v for c, v in zip(INDEXED_COLUMNS, self.indexed, strict=True)},
            "f_first_chunk": 1 if self.first_chunk else 0,
        }


_WHERE_BIND = re.compile(r"^w_[a-z0-9_]{1,28}$")
WHERE_MARKER = "/* where */ 1 = 1"


@dataclass(frozen=True)
class Where:
    """An extra SQL predicate over the chunk row ``c``, applied with the scope before the top-k.

    Built by trusted product code (the answers module turns facet values,
    ids and dates into it), never from user text: ``sql`` is a fragment such
    as ``JSON_VALUE(c.FACETS, '$.status') = :w_status`` and ``binds`` its
    values. Bind names must match ``w_[a-z0-9_]+`` so they cannot collide
    with the statements' own binds. Each search statement carries the
    marker :data:`WHERE_MARKER` where the fragment goes (``AND (fragment)``).
    """

    sql: str
    binds: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.sql, str) or not self.sql.strip() or ";" in self.sql:
            raise InputError("a where fragment must be one non-empty SQL predicate (no ';')")
        for name in self.binds:
            if not _WHERE_BIND.match(name):
                raise InputError(f"where bind {name!r} must match w_[a-z0-9_]+")

    def apply(self, sql: str) -> str:
        if WHERE_MARKER not in sql:
            raise InputError("this statement takes no where fragment")
        return sql.replace(WHERE_MARKER, "(" + self.sql + ")")


def with_where(sql: str, where: Where | None) -> str:
    """``sql`` with the caller's where fragment in place of the marker (unchanged without one)."""
    return sql if where is None else where.apply(sql)


@dataclass(frozen=True)
class Hit:
    """One row from a search leg; ``score`` is a distance (semantic) or a relevance (keyword)."""

    chunk_id: int
    source_type: str
    source_id: str
    content: str
    score: float
    owner_id: int | None = None
    indexed: tuple[int | None, ...] = NO_VALUES  # the indexed facet columns, in INDEXED_COLUMNS order
    chunk_no: int = 0
    facets: dict[str, Any] = field(default_factory=dict)


_new_object = object.__new__


def key_hits(rows: Iterable[tuple[Any, ...]]) -> list[Hit]:
    """Hits without text from ``(CHUNK_ID, SOURCE_TYPE, SOURCE_ID, score, OWNER_ID, (the indexed facet
    columns), CHUNK_NO)`` rows (NULL as None), as the in-process indexes propose hybrid's legs.

    Equal to ``Hit(chunk_id, type, id, "", score, owner, indexed, chunk_no)``, built without the
    frozen dataclass's ``__init__`` (one ``object.__setattr__`` per field): the two legs are ~200 hits
    per hybrid search, and building them that way cost about as much as fusing them.
    """
    out = []
    for chunk_id, source_type, source_id, score, owner, indexed, chunk_no in rows:
        hit = _new_object(Hit)
        hit.__dict__.update(
            chunk_id=chunk_id,
            source_type=source_type,
            source_id=source_id,
            content="",
            score=score,
            owner_id=owner,
            indexed=indexed,
            chunk_no=chunk_no,
            facets={},
        )
        out.append(hit)
    return out


# Positions [start, end) in a proposed semantic leg (0-based) whose order is not settled.
Run = tuple[int, int]


class SemanticHits(list[Hit]):
    """A semantic leg proposed by an in-process index (``CandidateIndex.propose_semantic``), its near
    ties open.

    Each record of a run in ``runs`` lies within a hair (``near_tie``) of its
    neighbours, too close for the index's arithmetic to order them as SQL
    does; whatever their order, they hold exactly those positions. Hybrid
    settles only the runs that can change its fused top k
    (``search.fusion.Fusion.runs_that_matter``): ``settle(runs)`` gives the leg with
    those runs in SQL's order (its distances, then chunk id), or None when
    SQL disagrees with the index (the caller then runs the checked legs).
    """

    def __init__(
        self,
        hits: Iterable[Hit],
        runs: Sequence[Run],
        settle: Callable[[Sequence[Run]], SemanticHits | None],
    ) -> None:
        super().__init__(hits)
        self.runs = list(runs)
        self.settle = settle


class KeywordHits(list[Hit]):
    """A keyword leg's best records fetched without text (``text=False``): each its chunk 0,
    empty content, the record's score; with the query terms and weights that choose the
    passages of the few records shown (``Engine.record_passages``)."""

    def __init__(
        self,
        hits: Iterable[Hit],
        terms: Mapping[str, int],
        weights: Mapping[str, float],
        lengths: Mapping[int, int] | None = None,
    ) -> None:
        super().__init__(hits)
        self.terms = dict(terms)
        self.weights = dict(weights)
        # Proposed by an in-process index (CandidateIndex.propose_keyword): each record's length as the
        # index knows it, re-checked in SQL with the passages of the records shown.
        self.lengths = None if lengths is None else dict(lengths)


@dataclass
class QueueStats:
    depth: int = 0
    oldest_age_s: float | None = None
    stalled: int = 0
    failed: int = 0
    chunks_by_type: dict[str, int] = field(default_factory=dict)


# Oracle's VECTOR_EMBEDDING takes VARCHAR2; 4000 bytes is the portable limit.
# The model reads at most 256 wordpieces, far fewer than 4000 bytes of text,
# so the cut never changes an embedding; both engines apply it for parity.
EMBED_TEXT_MAX_BYTES = 4000


def embed_text(content: str) -> str:
    raw = content.encode("utf-8")
    if len(raw) <= EMBED_TEXT_MAX_BYTES:
        return content
    return raw[:EMBED_TEXT_MAX_BYTES].decode("utf-8", errors="ignore")


def content_hash(content: str) -> str:
    return hashlib.sha256(content.encode("utf-8")).hexdigest()


def read_lob(value: Any) -> Any:
    """The one LOB reader: a LOB object's content, anything else unchanged.

    The Oracle engine's connections fetch CLOB/BLOB as str/bytes (see
    :func:`oracle_rag.engines.oracle.engine.output_type_handler`), so this matters
    only for a connection someone else configured (a host application's
    engine passed to a SQL source, ``auto_convert_lobs=False``).
    """
    if value is not None and not isinstance(value, str | bytes) and callable(getattr(value, "read", None)):
        return value.read()
    return value


def lob_text(value: Any) -> str:
    """A CLOB column as text (``""`` for NULL)."""
    value = read_lob(value)
    return "" if value is None else str(value)


@dataclass(frozen=True)
class ReadOnlyFile:
    """How the embedded engine runs untrusted SQL: its own read-only connection to this file."""

    path: Path


@dataclass(frozen=True)
class ReadOnlyUser:
    """How the Oracle engine runs untrusted SQL: a pool for the least-privilege read-only user."""

    sa_engine: Any  # sqlalchemy.Engine for the read-only user's URL


GuardedAccess = ReadOnlyFile | ReadOnlyUser


def search_binds(scope: Scope, filters: Filters, where: Where | None = None, **extra: Any) -> dict[str, Any]:
    types = list(filters.source_types)
    binds = {
        **(dict(where.binds) if where is not None else {}),
        **scope.binds(),
        **filters.binds(),
        "f_all_types": 0 if types else 1,
        "f_types": types or ["-"],
    }
    binds.update(extra)
    return binds


# A search row: CHUNK_ID, SOURCE_TYPE, SOURCE_ID, CONTENT, score, OWNER_ID, the indexed facet
# columns (ROW_INDEXED), CHUNK_NO (ROW_CHUNK_NO), FACETS, and a statement's own columns after them.
ROW_INDEXED = slice(6, 6 + len(INDEXED_COLUMNS))
ROW_CHUNK_NO = ROW_INDEXED.stop


def hits(rows: Sequence[Any]) -> list[Hit]:
    """Hits from a search statement's rows: CHUNK_ID, SOURCE_TYPE, SOURCE_ID, CONTENT, score,
    OWNER_ID, the indexed facet columns, CHUNK_NO, FACETS."""
    return [
        Hit(
            chunk_id=int(r[0]),
            source_type=r[1],
            source_id=str(r[2]),
            content=lob_text(r[3]),
            score=float(r[4]),
            owner_id=None if r[5] is None else int(r[5]),
            indexed=integers(r[ROW_INDEXED]),
            chunk_no=int(r[ROW_CHUNK_NO]),
            facets=facets_value(r[ROW_CHUNK_NO + 1]),
        )
        for r in rows
    ]


def integers(values: Iterable[Any]) -> tuple[int | None, ...]:
    """Nullable integer columns as read back (Oracle's NUMBER may arrive as Decimal or float)."""
    return tuple(None if v is None else int(v) for v in values)


def queue_rows(rows: Sequence[Any]) -> list[QueueRow]:
    return [
        QueueRow(
            dirty_id=int(r[0]),
            source_type=r[1],
            source_id=str(r[2]),
            action=r[3],
            attempts=int(r[4]),
            enqueued_at=r[5],
            last_error=r[6],
        )
        for r in rows
    ]


def chunk_params(chunks: Sequence[ChunkWrite]) -> list[dict[str, Any]]:
    return [
        {
            "source_type": c.source_type,
            "source_id": c.source_id,
            "owner_id": c.owner_id,
            **indexed_params(c.indexed),
            "chunk_no": c.chunk_no,
            "facets": c.facets,
            "content": c.content,
            "embed_text": c.embed_text,
            "content_hash": c.content_hash,
            "term_count": c.analysis.length if c.analysis is not None and c.chunk_no == 0 else None,
            **access_params(c.record_access),
        }
        for c in chunks
    ]


def indexed_params(values: Sequence[int | None]) -> dict[str, Any]:
    """The indexed facet columns' binds of a chunk write (each named after its facet)."""
    return {c.facet: v for c, v in zip(INDEXED_COLUMNS, values, strict=True)}


def access_params(access: RecordAccess) -> dict[str, Any]:
    return {
        "access_owner": access.owner,
        "access_public": 1 if access.public else 0,
        "access_groups_json": access.groups_json,
    }


def enqueue_params(items: Iterable[tuple[str, Any, str]]) -> list[dict[str, Any]]:
    """Queue rows as binds for the ENQUEUE statement; the action is validated."""
    return [{"source_type": t, "source_id": str(i), "action": check_action(a)} for t, i, a in items]


def check_action(action: str) -> str:
    upper = str(action).upper()
    if upper not in ("UPSERT", "DELETE"):
        raise InputError(f"action must be UPSERT or DELETE, got {action!r}")
    return upper


def vector_values(value: Any) -> list[float]:
    """A stored/returned vector as floats: SQLite gives a float32 blob, Oracle an array."""
    if isinstance(value, bytes | bytearray | memoryview):
        return np.frombuffer(bytes(value), dtype="<f4").astype(float).tolist()
    return [float(v) for v in value]


def one_per_record(rows: Sequence[Hit]) -> list[Hit]:
    """The first (best) hit of each record, in order: a chunk-level list cut to records."""
    seen: set[tuple[str, str]] = set()
    out = []
    for hit in rows:
        key = (hit.source_type, hit.source_id)
        if key not in seen:
            seen.add(key)
            out.append(hit)
    return out
