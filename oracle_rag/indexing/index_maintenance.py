"""Maintenance of the vector index: ``oracle-rag index rebuild | status``.

Why it exists (Oracle): V1 creates the IVF vector index before any row
exists, and an IVF index's centroids are fixed when it is built, so until a
rebuild the partitions describe an empty table and approximate search
loses recall as data arrives and drifts. ``rebuild`` recomputes them from
the current chunks, ``status`` measures what the index achieves with
``DBMS_VECTOR.INDEX_ACCURACY_QUERY`` on stored vectors. (Keyword search is
BM25 over RAG_CHUNK_TERM, plain B-tree tables: the Oracle Text index and its
``optimize`` command are gone, V9.) The statements and their sources are in
:mod:`oracle_rag.engines.oracle.index_sql`.

``bootstrap`` calls :func:`rebuild_if_due`: the first deploy after the first
backfill rebuilds once (nothing recorded with chunks in RAG_MAINTENANCE),
and later deploys rebuild again when the table has doubled since.
Operators run ``oracle-rag index rebuild`` after large loads or
periodically (``docs/operations-oracle.md``). A rebuild that fails in
``bootstrap`` is reported in its line, not raised: the deploy has migrated
and loaded the model, and the old index still answers.

Every step acts on the vector index of the active model generation's slot
(``RAG_CHUNK_VEC_IX`` or ``RAG_CHUNK_VEC_2_IX``, :func:`searched_index`):
the one searches use. ``status`` lists both when both exist and measures
the searched one; each slot's rebuilds are recorded under their own task.

The embedded engine keeps an exact in-process index: nothing to rebuild or
optimise, and its accuracy is 100% by construction.
"""

from __future__ import annotations

import array
import re
from dataclasses import asdict, dataclass, field
from typing import Any

from oracle_rag.engines import Engine
from oracle_rag.engines.generation_sql import VECTOR_INDEX_NAMES
from oracle_rag.engines.generations import Generation
from oracle_rag.engines.oracle import index_sql as q
from oracle_rag.engines.statements import Sql
from oracle_rag.errors import (
    ConfigurationError,
    DatabaseError,
    InputError,
    driver_error_code,
    wrap_driver_error,
)

VECTOR_REBUILD = q.rebuild_task(1)
GROWTH_FACTOR = 2.0
"""``bootstrap`` rebuilds again once the table holds this many times the chunks of the last rebuild."""

_ACHIEVED = re.compile(r"Accuracy achieved \((\d+(?:\.\d+)?)%\)")
EMBEDDED = "the embedded engine searches exactly (in-process index): nothing to maintain"


@dataclass
class IndexStatus:
    engine: str
    indexes: dict[str, dict[str, str | None]] = field(default_factory=dict)
    chunks: int = 0
    last_rebuild: dict[str, Any] | None = None
    target_accuracy: int | None = None
    top_k: int = 10
    probes: int = 0
    accuracy: list[float] = field(default_factory=list)
    reports: list[str] = field(default_factory=list)
    maintained: bool = True  # the engine has indexes to maintain (Engine.maintains_indexes)
    searched: str = q.VECTOR_INDEX  # the active generation's vector index: the one rebuilt and measured

    def to_dict(self) -> dict[str, Any]:
        """The JSON of ``oracle-rag index status --json`` (``maintained`` is implied by ``engine``)."""
        out = asdict(self)
        del out["maintained"]
        return {**out, "mean_accuracy": self.mean_accuracy}

    @property
    def mean_accuracy(self) -> float | None:
        return round(sum(self.accuracy) / len(self.accuracy), 1) if self.accuracy else None

    def lines(self) -> list[str]:
        if not self.maintained:
            return [EMBEDDED]
        out = []
        for name, info in sorted(self.indexes.items()):
            subtype = f" {info['subtype']}" if info.get("subtype") else ""
            mark = " (searched)" if len(self.indexes) > 1 and name == self.searched else ""
            out.append(f"{name}: {info['type']}{subtype}, {info['status']}{mark}")
        out.append(f"chunks: {self.chunks}")
        if self.last_rebuild:
            out.append(
                f"last vector rebuild: {self.last_rebuild['done_at']} on {self.last_rebuild['chunks']} chunks"
            )
        else:
            out.append(
                "last vector rebuild: never (IVF centroids are those of the empty table: "
                "run `oracle-rag index rebuild`)"
            )
        if self.probes:
            out.append(
                f"accuracy (DBMS_VECTOR.INDEX_ACCURACY_QUERY, top-{self.top_k} over {self.probes} stored "
                f"vectors, target {self.target_accuracy}%): mean {self.mean_accuracy}%, "
                f"min {min(self.accuracy):g}%"
            )
        elif self.chunks:
            out.append("accuracy: not measured")
        return out


def server_version(conn: Any) -> tuple[int, ...]:
    """The server's version from python-oracledb (``connection.version``, e.g. ``23.26.0.0.0``)."""
    raw = conn.connection.driver_connection.version
    return tuple(int(p) for p in str(raw).split(".") if p.isdigit())


def searched_index(gen: Generation) -> str:
    """The vector index searches of ``gen`` use: its slot's (``RAG_CHUNK_VEC_IX``, ``RAG_CHUNK_VEC_2_IX``)."""
    return VECTOR_INDEX_NAMES[gen.slot]


def rebuild_plan(
    version: tuple[int, ...], index_subtype: str | None, partitions: int | None = None, slot: int = 1
) -> list[tuple[str, Sql]]:
    """The statements that rebuild ``slot``'s vector index, in the order they are tried: (how, Sql).

    IVF on 26ai (23.26+): ``ALTER INDEX ... REBUILD ONLINE``, which recomputes
    NEIGHBOR PARTITIONS from the data; with ``vector_index_partitions`` set and
    23.26.1+, ``ALTER INDEX ... REBUILD PARAMETERS (NEIGHBOR PARTITIONS n)``
    instead, so the configured count survives the rebuild. Last, always:
    ``DBMS_VECTOR.REBUILD_INDEX(idx_name)``, which rebuilds from the index's
    own DDL: the only path on 23ai and for HNSW, and the fallback when the
    ALTER INDEX form is refused (ORA-52401, ORA-51850 and the like).
    """
    is_ivf = "HNSW" not in str(index_subtype or "").upper()
    plan: list[tuple[str, Sql]] = []
    if is_ivf and version[:2] >= (23, 26):
        if partitions and tuple(version[:3]) >= (23, 26, 1):
            plan.append(
                (
                    f"ALTER INDEX ... REBUILD PARAMETERS (NEIGHBOR PARTITIONS {int(partitions)})",
                    q.rebuild_with_partitions(partitions, slot),
                )
            )
        else:
            plan.append(("ALTER INDEX ... REBUILD ONLINE", q.rebuild_online(slot)))
    plan.append(("DBMS_VECTOR.REBUILD_INDEX", q.rebuild_package(slot)))
    return plan


def rebuild_statement(
    version: tuple[int, ...], index_subtype: str | None, partitions: int | None = None, slot: int = 1
) -> str:
    """The Oracle text of the first statement :func:`rebuild_plan` tries."""
    return rebuild_plan(version, index_subtype, partitions, slot)[0][1].oracle or ""


def _info(engine: Engine, conn: Any) -> dict[str, dict[str, str | None]]:
    rows = conn.execute(engine.statement(q.INDEX_INFO)).fetchall()
    return {str(r[0]): {"type": r[1], "subtype": r[2], "status": r[3]} for r in rows}


def _last(engine: Engine, conn: Any, task: str) -> dict[str, Any] | None:
    row = conn.execute(engine.statement(q.LAST_MAINTENANCE), {"task": task}).first()
    return (
        None
        if row is None
        else {
            "done_at": row[0].isoformat() if hasattr(row[0], "isoformat") else row[0],
            "chunks": int(row[1]),
        }
    )


def _record(engine: Engine, conn: Any, task: str, chunks: int) -> None:
    conn.execute(engine.statement(q.RECORD_MAINTENANCE), {"task": task, "chunks": chunks})


def _chunks(engine: Engine, conn: Any) -> int:
    return int(conn.execute(engine.statement(q.CHUNK_COUNT)).scalar_one())


def rebuild(engine: Engine) -> str:
    """Rebuild the active generation's vector index from the current chunks; one line saying how.

    Tries :func:`rebuild_plan` in order: a statement the server refuses is
    reported in the line and the next one runs; only the last one's failure
    raises.
    """
    if not engine.maintains_indexes:
        return EMBEDDED
    partitions = (
        engine.settings.vector_index_partitions if engine.settings.vector_index_type == "IVF" else None
    )
    refused: list[str] = []
    try:
        with engine.begin() as conn:
            engine.require_system_access(conn, "index rebuild")
            slot = engine.active_generation(conn).slot
            name = VECTOR_INDEX_NAMES[slot]
            info = _info(engine, conn).get(name)
            if info is None:
                fix = "`oracle-rag migrate`" if slot == 1 else "`oracle-rag model activate` (it builds it)"
                raise DatabaseError(f"{name} does not exist: run {fix} first")
            chunks = _chunks(engine, conn)
            plan = rebuild_plan(server_version(conn), info.get("subtype"), partitions, slot)
        for i, (how, sql) in enumerate(plan):
            try:
                with engine.begin() as conn:
                    conn.exec_driver_sql(engine.text(sql))  # DDL / PL/SQL: commits on its own
                    _record(engine, conn, q.rebuild_task(slot), chunks)
                break
            except Exception as exc:
                if i == len(plan) - 1:
                    _require_index(engine, name, how, exc)
                    raise
                refused.append(
                    f"{how.split(' (')[0]} refused ({driver_error_code(exc) or type(exc).__name__})"
                )
        _require_index(engine, name, how)
    except (DatabaseError, ConfigurationError):
        raise
    except Exception as exc:
        raise wrap_driver_error(exc, "rebuilding the vector index") from None
    fallback = f"; {', '.join(refused)}" if refused else ""
    return f"rebuilt {name} on {chunks} chunks ({how}{fallback})"


def _require_index(engine: Engine, name: str, how: str, failure: BaseException | None = None) -> None:
    """After a rebuild (or its failure), the vector index must exist and be VALID; raise loudly otherwise.

    ``DBMS_VECTOR.REBUILD_INDEX`` drops the index and creates it again: a
    create that fails leaves no vector index, and ``FETCH APPROX`` then runs
    as an exact scan with no error. A missing or unusable index is therefore
    the error, whatever the rebuild statement itself said.
    """
    with engine.connect() as conn:
        info = _info(engine, conn).get(name)
    if info is not None and info.get("status") == "VALID":
        return
    said = f" ({driver_error_code(failure) or type(failure).__name__})" if failure is not None else ""
    state = "is gone" if info is None else f"is {info.get('status')}"
    raise DatabaseError(
        f"{name} {state} after {how}{said}: semantic search now scans every chunk; "
        f"run `oracle-rag index rebuild` again, or re-create it as migration V1 (slot 1) or "
        f"`oracle-rag model activate` (slot 2) does "
        f"(docs/operations-oracle.md)",
        vendor_code=driver_error_code(failure) if failure else None,
    )


def rebuild_if_due(engine: Engine) -> str:
    """``bootstrap``'s step: rebuild when chunks exist and none were there at the last rebuild, or doubled.

    Does not raise for a rebuild that failed and left the index as it was: a
    deploy has already migrated and loaded the model, and that index still
    answers (with the centroids it had). The failure is the returned line,
    and the next bootstrap tries again (nothing was recorded). It raises when
    the index is gone or not VALID afterwards (the package rebuild drops it
    first): approximate search would silently scan.
    """
    if not engine.maintains_indexes:
        return EMBEDDED
    with engine.connect() as conn:
        slot = engine.active_generation(conn).slot
        chunks = _chunks(engine, conn)
        last = _last(engine, conn, q.rebuild_task(slot))
    if chunks == 0:
        return "vector index: no chunks yet; the first bootstrap after a backfill rebuilds it"
    if last is not None and last["chunks"] > 0 and chunks < GROWTH_FACTOR * last["chunks"]:
        return f"vector index: rebuilt on {last['chunks']} chunks, now {chunks}; not due"
    try:
        return "vector index: " + rebuild(engine)
    except DatabaseError as exc:
        with engine.connect() as conn:
            info = _info(engine, conn).get(VECTOR_INDEX_NAMES[slot])
        if info is None or info.get("status") != "VALID":
            raise  # the package rebuild dropped it and did not create it again: the deploy must not pass
        return (
            f"vector index: NOT rebuilt ({exc.message}); search still works with the old centroids; "
            f"run `oracle-rag index rebuild` once the cause is fixed"
        )


def status(engine: Engine, *, probes: int = 20, top_k: int = 10) -> IndexStatus:
    """What the indexes are and, for the vector index, the accuracy it achieves on stored vectors."""
    if not 0 <= probes <= 1000 or not 1 <= top_k <= 100:
        raise InputError("probes must be in [0, 1000] and top_k in [1, 100]")
    out = IndexStatus(engine=engine.name, top_k=top_k, maintained=engine.maintains_indexes)
    if not engine.maintains_indexes:
        return out
    import oracledb

    target = int(engine.settings.vector_index_accuracy)
    out.target_accuracy = target
    try:
        with engine.connect() as conn:
            gen = engine.active_generation(conn)
            out.searched = searched_index(gen)
            out.indexes = _info(engine, conn)
            out.chunks = _chunks(engine, conn)
            out.last_rebuild = _last(engine, conn, q.rebuild_task(gen.slot))
            if probes == 0 or out.chunks == 0 or out.searched not in out.indexes:
                return out

            step = max(1, out.chunks // probes)
            probe_binds = {"step": step, "n": probes, "generation_id": gen.generation_id}
            vectors = [r[0] for r in conn.execute(engine.statement(q.ACCURACY_PROBES, gen=gen), probe_binds)]
            cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
            try:
                report = cursor.var(oracledb.DB_TYPE_VARCHAR, 400)
                for vector in vectors:
                    cursor.execute(
                        engine.text(q.ACCURACY_QUERY),
                        {
                            "report": report,
                            "qv": array.array("f", vector),
                            "index_name": out.searched,
                            "k": top_k,
                            "target": target,
                        },
                    )
                    text = str(report.getvalue() or "")
                    out.reports.append(text)
                    match = _ACHIEVED.search(text)
                    if match:
                        out.accuracy.append(float(match.group(1)))
            finally:
                cursor.close()
            out.probes = len(out.accuracy)
    except Exception as exc:
        raise wrap_driver_error(exc, "reading the index status") from None
    return out
