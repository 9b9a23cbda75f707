"""Execution accuracy of text-to-SQL on aggregate questions, truth computed in SQL.

Each question of ``bench/data/aggregate/questions.json`` is asked of the
guarded text-to-SQL path (``AggregateService.ask``: the model writes SQL over
the scoped views, the guard checks it, the database runs it) as the set's
caller (a manager, who sees every task, so the truth over the reference TASK
table is the same rows). A result is right when it has as many rows as the
truth and every truth value, rounded to 2 decimals, is among its values (the
model may add columns, such as how many rows were left out). Needs a model:
``--llm-url`` (an OpenAI-compatible endpoint, e.g. ``/work/shared/tools/llm-server.sh``).

Run: ``.venv/bin/python bench/aggregate_qa.py --data-dir DIR --llm-url URL [--llm-model M] [--limit N]``
(DIR: a data directory bench/qa.py prepared). Writes ``bench/results/aggregate_qa.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ROOT / "bench" / "data" / "aggregate" / "questions.json"
RESULTS = ROOT / "bench" / "results" / "aggregate_qa.json"
sys.path.insert(0, str(ROOT))

import sqlalchemy as sa  # noqa: E402

from oracle_rag.answering.aggregate import AggregateResult, AggregateService  # noqa: E402
from oracle_rag.answering.chat import LLMClient  # noqa: E402
from oracle_rag.callers.access import load_caller  # noqa: E402
from oracle_rag.config import load_settings  # noqa: E402
from oracle_rag.errors import RagError  # noqa: E402
from oracle_rag.system import RagSystem  # noqa: E402


def values(rows: list[Any]) -> set[str]:
    out = set()
    for row in rows:
        for v in row:
            if isinstance(v, int | float) and not isinstance(v, bool):
                out.add(f"{round(float(v), 2):.2f}")
            elif v is not None:
                out.add(str(v).upper())
    return out


def right(truth: list[Any], got: list[Any]) -> bool:
    return len(truth) == len(got) and values(truth) <= values(got)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--data-dir", help="a data directory with the demo seeded and indexed (bench/qa.py makes one)"
    )
    parser.add_argument("--questions", default=str(QUESTIONS))
    parser.add_argument(
        "--llm-url", help="an OpenAI-compatible endpoint (without one there is nothing to measure)"
    )
    parser.add_argument("--llm-model", default="local")
    parser.add_argument("--llm-timeout", type=float, default=300.0)
    parser.add_argument("--limit", type=int, default=0, help="ask only the first N questions")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON results go")
    args = parser.parse_args()
    if not args.llm_url or not args.data_dir:
        # run_all runs every bench; this one measures a model, and CI has none (never a dependency)
        print("aggregate_qa: skipped: give --llm-url and --data-dir to measure a model's text-to-SQL")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(
            json.dumps({"bench": "aggregate_qa", "skipped": "no --llm-url or --data-dir"}) + "\n"
        )
        return
    data = json.loads(Path(args.questions).read_text(encoding="utf-8"))
    questions = data["questions"][: args.limit or None]
    settings = load_settings(env={}, data_dir=args.data_dir).with_overrides(
        llm_url=args.llm_url, llm_model=args.llm_model, llm_timeout_s=args.llm_timeout, llm_max_retries=0
    )
    rag = RagSystem(settings)
    llm = LLMClient(settings)
    service = AggregateService(rag.engine, settings)
    rows = []
    try:
        with rag.engine.connect() as conn:
            caller = load_caller(conn, data["as"])
        for q in questions:
            with rag.engine.connect() as conn:
                truth = [list(r) for r in conn.execute(sa.text(q["truth"])).fetchall()]
            started = time.perf_counter()
            try:
                result = service.ask(q["question"], caller, llm.complete_query)
            except RagError as exc:  # the model's failure is a wrong answer, not the end of the run
                result = AggregateResult(q["question"], None, error=str(exc))
            seconds = time.perf_counter() - started
            ok = result.error is None and right(truth, result.rows)
            rows.append(
                {
                    "id": q["id"],
                    "lang": q["lang"],
                    "question": q["question"],
                    "right": ok,
                    "seconds": round(seconds, 1),
                    "sql": result.sql,
                    "error": result.error,
                    "repairs": getattr(result, "repairs", []),
                    "columns": result.columns,
                    "rows": result.rows[:5],
                    "truth": truth[:5],
                }
            )
            print(
                f"{q['id']} {'ok ' if ok else 'BAD'} {seconds:5.0f} s  {result.sql or result.error}",
                flush=True,
            )
    finally:
        rag.close()
    accuracy = round(sum(r["right"] for r in rows) / len(rows), 3) if rows else 0.0
    print(
        f"execution accuracy {accuracy:.3f} ({sum(r['right'] for r in rows)}/{len(rows)}), model {args.llm_model}"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "bench": "aggregate_qa",
                "model": args.llm_model,
                "accuracy": accuracy,
                "python": platform.python_version(),
                "questions": rows,
            },
            indent=2,
            ensure_ascii=False,
            default=str,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
