"""Structured answers on a large SQL-query source: p50 of a filter list and a per-facet count.

A ``BENCH_TICKET`` table of N rows (bench/qa_tickets.py, deterministic) is
declared as the ``tickets`` source with its meaning options, read through
``SqlSource.read`` (the product's rows-to-documents code: facets, owner,
chunk text) and written to RAG_CHUNK with a zero vector: the statements
measured here (``COUNT(*)``, ``GROUP BY`` a facet, the id-order list, the
vocabulary's facet values) never read the vector, and embedding 100,000
rows on 2 cores would take the bench's whole budget. Questions go through
``Chat.answer`` without a model (understanding + SQL + rendering), as a
manager (every row) and as a developer (the scope predicate), warm (the
vocabulary cached, as in a serving process) and the first call (cold).

Baseline in the same run: the same questions on a 10,000-row copy; the
ratio says how the time grows with the rows.

Run: ``.venv/bin/python bench/answers_scale.py [--rows 100000] [--repeat 15]``.
Writes ``bench/results/answers_scale.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "answers_scale.json"
sys.path.insert(0, str(ROOT))

import qa_tickets  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from oracle_rag.answering.chat import Chat  # noqa: E402
from oracle_rag.callers.access import load_caller  # noqa: E402
from oracle_rag.config import load_settings  # noqa: E402
from oracle_rag.demo.seed import seed  # noqa: E402
from oracle_rag.sources import SqlSource  # noqa: E402
from oracle_rag.system import RagSystem  # noqa: E402

TODAY = dt.date(2026, 3, 11)
MANAGER, DEVELOPER = 3, 12
QUESTIONS = {
    "filter list": "critical tickets in EMEA that are still open",
    "filter list (ES)": "tickets de severidad alta en APAC sin resolver",
    "per-facet count": "how many tickets per region?",
    "per-facet count, filtered": "how many open tickets per severity?",
}
# The access columns as the indexer writes them for this source's policy (the owner; an unowned row public).
INSERT = sa.text(
    "INSERT INTO RAG_CHUNK (SOURCE_TYPE, SOURCE_ID, CHUNK_NO, OWNER_ID, ACCESS_OWNER, ACCESS_PUBLIC, FACETS, "
    "CONTENT, EMBEDDING, CONTENT_HASH) VALUES ('tickets', :id, 0, :owner, :owner, :public, :facets, "
    ":content, :vector, :hash)"
)


def build(data_dir: Path, rows: int) -> RagSystem:
    settings = load_settings(env={}, data_dir=str(data_dir), sources={"tickets": qa_tickets.SOURCE})
    rag = RagSystem(settings)
    rag.migrate(demo=True)
    seed(rag.engine, 40, today=TODAY)  # EMPLOYEE (owners' names and roles); the tasks are not indexed
    source = SqlSource("tickets", **{k: v for k, v in qa_tickets.SOURCE.items()})
    with rag.engine.begin() as conn:
        qa_tickets.create(conn, rows, TODAY)
    started = time.perf_counter()
    with rag.engine.connect() as conn:
        docs = source.read(conn).documents
    vector = bytes(1536)
    with rag.engine.begin() as conn:
        batch: list[dict[str, Any]] = []
        for d in docs.values():
            batch.append(
                {
                    "id": d.document_id,
                    "owner": d.owner_id,
                    "public": 1 if d.owner_id is None else 0,
                    "facets": json.dumps(d.facets),
                    "content": d.chunk_text,
                    "vector": vector,
                    "hash": d.doc_hash,
                }
            )
            if len(batch) == 5000:
                conn.execute(INSERT, batch)
                batch = []
        if batch:
            conn.execute(INSERT, batch)
    print(f"{rows:,} rows read and written in {time.perf_counter() - started:.1f} s", flush=True)
    return rag


def measure(rag: RagSystem, repeat: int) -> dict[str, Any]:
    chat = Chat(rag, None, today=lambda: TODAY)
    out: dict[str, Any] = {}
    for who in (MANAGER, DEVELOPER):
        with rag.engine.connect() as conn:
            caller = load_caller(conn, who)
        for label, question in QUESTIONS.items():
            t0 = time.perf_counter()
            first = chat.answer(question, caller, store=False)
            cold = time.perf_counter() - t0
            times = []
            for _ in range(repeat):
                t0 = time.perf_counter()
                chat.answer(question, caller, store=False)
                times.append(time.perf_counter() - t0)
            key = f"{label} as {'manager' if who == MANAGER else 'developer'}"
            out[key] = {
                "p50_ms": round(statistics.median(times) * 1000, 1),
                "max_ms": round(max(times) * 1000, 1),
                "first_ms": round(cold * 1000, 1),
                "answerer": first.answerer,
                "first_line": first.answer.split("\n", 1)[0][:120],
            }
            print(
                f"  {key:<45} p50 {out[key]['p50_ms']:7.1f} ms  first {out[key]['first_ms']:7.1f} ms  "
                f"[{first.answerer}] {out[key]['first_line'][:70]}",
                flush=True,
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--baseline-rows", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON results go")
    args = parser.parse_args()
    runs = {}
    for rows in (args.baseline_rows, args.rows):
        with tempfile.TemporaryDirectory() as tmp:
            rag = build(Path(tmp), rows)
            try:
                print(f"{rows:,} rows:")
                runs[rows] = measure(rag, args.repeat)
            finally:
                rag.close()
    base, big = runs[args.baseline_rows], runs[args.rows]
    ratios = {k: round(big[k]["p50_ms"] / base[k]["p50_ms"], 2) for k in big if base[k]["p50_ms"]}
    print(
        f"p50 ratio {args.rows:,} / {args.baseline_rows:,} rows: "
        + ", ".join(f"{k} {v}x" for k, v in ratios.items())
    )
    worst = max(v["p50_ms"] for v in big.values())
    goal = worst <= 200
    print(
        f"goal (p50 <= 200 ms at {args.rows:,} rows): {'met' if goal else 'NOT met'} (worst p50 {worst} ms)"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "bench": "answers_scale",
                "rows": args.rows,
                "baseline_rows": args.baseline_rows,
                "repeat": args.repeat,
                "python": platform.python_version(),
                "runs": {str(k): v for k, v in runs.items()},
                "ratios": ratios,
                "goal_met": goal,
            },
            indent=2,
            ensure_ascii=False,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
