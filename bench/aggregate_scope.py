"""The cost of the declared-access scope in the guarded aggregate views, against V2's fixed rule.

Synthetic demo schema on the embedded engine (no embedding: the views read
only RAG_CHUNK's access columns): N tasks over 40 employees, each with its
chunk-0 row as the indexer writes it for the TASK source (owner policy:
``ACCESS_OWNER`` = the assignee), random vectors and text so the rows have
their real size. Measured, p50 of ``COUNT(*)`` and of a ``GROUP BY STATUS``:

* ``sql``: the view's SELECT alone on one connection with the caller
  functions registered (what the database does);
* ``guarded``: ``AggregateService.run_sql`` (the whole guarded path: fresh
  read-only connection, sealing, authorizer, caps) — what a caller waits for.

Baseline in the same run, same file: V2's view text (the literal
``EMPLOYEE.ROLE`` manager/admin, else the assignee) as ``RAG_V_TASK_V2``, and
the per-row correlated probe of RAG_CHUNK this module replaced. Callers: a
developer (the scope is evaluated) and an admin (see-all: short-circuits).
Writes ``bench/results/aggregate_scope.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "aggregate_scope.json"
sys.path.insert(0, str(ROOT))

import sqlean  # noqa: E402

from oracle_rag.answering.aggregate import AggregateService  # noqa: E402
from oracle_rag.answering.aggregate.catalog import Catalog, Column, View  # noqa: E402
from oracle_rag.callers.caller import Caller  # noqa: E402
from oracle_rag.config import load_settings  # noqa: E402
from oracle_rag.engines.guarded_scope_sql import guarded_caller  # noqa: E402
from oracle_rag.engines.scope_sql import scope_predicate  # noqa: E402
from oracle_rag.system import RagSystem  # noqa: E402

EMPLOYEES = 40
V2_VIEW = """CREATE VIEW RAG_V_TASK_V2 AS SELECT t.TASK_ID, t.STATUS FROM TASK t WHERE EXISTS (
  SELECT 1 FROM EMPLOYEE e WHERE e.EMPLOYEE_ID = rag_caller_id()
    AND (e.ROLE IN ('manager', 'admin') OR t.ASSIGNEE_ID = e.EMPLOYEE_ID))"""
_PROBE_SCOPE = scope_predicate("rag_chunk", guarded_caller("sqlite"))
PROBE_VIEW = f"""CREATE VIEW RAG_V_TASK_PROBE AS SELECT t.TASK_ID, t.STATUS FROM TASK t WHERE
  rag_caller_id() IS NOT NULL AND (rag_caller_see_all() = 1 OR EXISTS (SELECT 1 FROM RAG_CHUNK rag_chunk
  WHERE rag_chunk.SOURCE_TYPE = 'TASK' AND rag_chunk.SOURCE_ID = CAST(t.TASK_ID AS TEXT)
  AND rag_chunk.CHUNK_NO = 0 AND {_PROBE_SCOPE}))"""
VIEWS = ("RAG_V_TASK_V2", "RAG_V_TASK_PROBE", "RAG_V_TASK")
QUERIES = {
    "count": "SELECT COUNT(*) AS N FROM {view}",
    "group_by_status": "SELECT STATUS, COUNT(*) AS N FROM {view} GROUP BY STATUS",
}


def fill(rag: RagSystem, n: int, rng: np.random.Generator) -> None:
    raw = rag.engine.sa_engine.raw_connection()
    try:
        cur = raw.cursor()
        cur.executemany(
            "INSERT INTO EMPLOYEE (EMPLOYEE_ID, FIRST_NAME, LAST_NAME, ROLE) VALUES (?, ?, ?, ?)",
            [(e, f"F{e}", f"L{e}", "admin" if e == 1 else "developer") for e in range(1, EMPLOYEES + 1)],
        )
        cur.execute("INSERT INTO PROJECT (PROJECT_ID, NAME, STATUS) VALUES (1, 'P', 'ACTIVE')")
        tasks, chunks = [], []
        for i in range(1, n + 1):
            owner = int(rng.integers(2, EMPLOYEES + 1))
            status = ("TODO", "IN_PROGRESS", "DONE", "BLOCKED")[int(rng.integers(0, 4))]
            tasks.append((i, f"Task {i}", status, "LOW", 1, owner))
            vec = rng.standard_normal(384).astype("<f4")
            chunks.append(
                ("TASK", str(i), owner, f"[TASK #{i}] " + "lorem ipsum " * 60, vec.tobytes(), "h", 120, owner)
            )
        cur.executemany(
            "INSERT INTO TASK (TASK_ID, TITLE, STATUS, PRIORITY, PROJECT_ID, ASSIGNEE_ID) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            tasks,
        )
        cur.executemany(
            "INSERT INTO RAG_CHUNK (SOURCE_TYPE, SOURCE_ID, OWNER_ID, CONTENT, EMBEDDING, CONTENT_HASH, "
            "TERM_COUNT, ACCESS_OWNER, ACCESS_PUBLIC, ACCESS_GROUPS) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, '[]')",
            chunks,
        )
        cur.execute(V2_VIEW)
        cur.execute(PROBE_VIEW)
        raw.commit()
    finally:
        raw.close()


def p50(fn: Callable[[], Any], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000.0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    rng = np.random.default_rng(20261202)
    out: dict[str, Any] = {"tasks": args.tasks, "runs": args.runs}
    with tempfile.TemporaryDirectory() as tmp:
        rag = RagSystem(load_settings(env={}, data_dir=tmp))
        rag.migrate(demo=True)
        fill(rag, args.tasks, rng)
        catalog = Catalog(
            tuple(View(v, "tasks", (Column("TASK_ID", "INTEGER"), Column("STATUS", "TEXT"))) for v in VIEWS)
        )
        service = AggregateService(rag.engine, rag.settings, catalog)
        service.text_check = False  # measure the database's work, not the parser's
        conn = sqlean.connect(str(Path(tmp) / "oracle-rag.db"))
        for who, caller in (("developer", Caller(7, "developer")), ("admin", Caller(1, "admin"))):
            conn.create_function("rag_caller_id", 0, lambda c=caller: c.employee_id, deterministic=True)
            conn.create_function(
                "rag_caller_see_all", 0, lambda c=caller: int(c.sees_all), deterministic=True
            )
            conn.create_function("rag_caller_groups", 0, lambda: "[]", deterministic=True)
            for name, query in QUERIES.items():
                row: dict[str, Any] = {}
                for view in VIEWS:
                    sql = query.format(view=view)
                    row[view] = {
                        "rows": conn.execute(sql).fetchall()[:1],
                        "sql_p50_ms": round(p50(lambda s=sql: conn.execute(s).fetchall(), args.runs), 2),
                        "guarded_p50_ms": round(
                            p50(lambda s=sql, c=caller: service.run_sql(s, c), args.runs), 2
                        ),
                    }
                for view in VIEWS[1:]:
                    for kind in ("sql_p50_ms", "guarded_p50_ms"):
                        row[view][kind.replace("p50_ms", "ratio_to_v2")] = round(
                            row[view][kind] / max(row["RAG_V_TASK_V2"][kind], 1e-6), 2
                        )
                out[f"{who} {name}"] = row
        conn.close()
        rag.close()
    out["environment"] = {
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_average_at_start": os.getloadavg(),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(out, indent=2, default=str) + "\n")
    print(json.dumps(out, indent=2, default=str))


if __name__ == "__main__":
    main()
