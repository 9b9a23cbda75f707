"""Bounded cost of hostile aggregates: server RSS and stop time under 4 parallel attacks.

Setup (not measured): a data directory with the demo data set (2,000 tasks by
default; no index is needed, aggregates read the RAG_V_* views), an admin
token (the admin's views show every row, so cross joins are as large as they
get), and the scripted OpenAI-protocol model of the test suite
(``tests/llm_server.py``) on 127.0.0.1. ``oracle-rag serve`` runs as a
subprocess with ``--no-worker``, ``aggregate_retries = 0`` and
``aggregate_timeout_s`` = ``--timeout``.

Baseline, measured in the same run: the server's RSS while idle after one
legitimate aggregate (warm-up). Then rounds of ``--parallel`` chat requests at
once (default 4), each routed to aggregation, whose "model" returns one
hostile query, until every query of ``HOSTILE`` has run (9 queries: 3 rounds):
a doubling string CTE, a 6-way cross join, a doubling ``replace`` CTE, a
sorted 3-way cross join, and the calls SQLite's progress handler
cannot interrupt: ``trim(x, y)``, ``replace``, ``instr`` on values of
2^``--exponent`` characters built by a recursive CTE (needle or character set
half as long), again and again, and one ``LIKE``/``GLOB`` with a long
``'%aaa…ab'`` pattern (2^(exponent-2) bytes, at most 40,000: under SQLite's
own 50,000-byte default, so a server without the cap runs it). RSS is sampled
every 20 ms from ``/proc/<pid>/status``; the server's CPU time per round from
``/proc/<pid>/stat``.

Reported: peak RSS minus idle RSS (goal: within +300 MB), each request's
wall time over the timeout (goal: every one within 1.5x), each round's server
CPU seconds over ``parallel x timeout`` (goal: within 1.5x: the work stops,
not only the answer), the refusal each got, and that the server answered a
legitimate request afterwards. Wall times depend on the machine's load; the
CPU ratio much less.

Run: ``.venv/bin/python bench/aggregate_cost.py`` (``--data-dir DIR`` keeps
the prepared database; ``--exponent 16 --timeout 2`` for a short run against a
server without the bounded functions). Writes ``bench/results/aggregate_cost.json``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "aggregate_cost.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from chat_load import start_server  # noqa: E402  (bench/ is not a package)

AGG_ONLY = '{"retrieval": false, "aggregation": true}'
LEGIT = "SELECT STATUS, COUNT(*) AS N FROM RAG_V_TASK GROUP BY STATUS"
HOSTILE = {
    "doubling string cte": "WITH RECURSIVE r(s) AS (SELECT 'x' UNION ALL SELECT s || s FROM r) "
    "SELECT max(length(s)) FROM r",
    "6-way cross join": "SELECT COUNT(*) FROM RAG_V_TASK a, RAG_V_TASK b, RAG_V_TASK c, RAG_V_TASK d, "
    "RAG_V_TASK e, RAG_V_TASK f",
    "doubling replace cte": "WITH RECURSIVE r(s, n) AS (SELECT 'ab', 0 UNION ALL SELECT replace(s, 'a', s), n + 1 "
    "FROM r WHERE n < 60) SELECT max(length(s)) FROM r",
    "sorted 3-way cross join": "SELECT a.TITLE || b.TITLE || c.TITLE AS T FROM RAG_V_TASK a, RAG_V_TASK b, "
    "RAG_V_TASK c ORDER BY T DESC",
}
# One call of these is one step of SQLite's virtual machine. _VALUES builds v(s, p): s is
# 2^e 'a', p is 2^(e-1) 'b' then 'a' (the built-in trim compares every character of s with p up to
# its last character); `calls` makes one call per step of its recursion, for ever (the value changes
# with i, so no call is computed once). LIKE/GLOB: one call with a pattern the query builds.
_VALUES = (
    "WITH RECURSIVE big(s, n) AS (SELECT 'a', 0 UNION ALL SELECT s || s, n + 1 FROM big WHERE n < {e}), "
    "v(s, p) AS (SELECT (SELECT s FROM big WHERE n = {e}), "
    "(SELECT replace(s, 'a', 'b') FROM big WHERE n = {e} - 1) || 'a') "
)
_CALLS = (
    ", calls(i, r) AS (SELECT 0, 0 UNION ALL SELECT i + 1, {call} FROM calls, v) SELECT count(*) FROM calls"
)
FUNCTION_ATTACKS = {
    "trim(x, y) calls": _CALLS.format(call="length(trim(s || i, p))"),
    "replace calls": _CALLS.format(call="length(replace(s || i, substr(p, 2), 'z'))"),
    "instr calls": _CALLS.format(call="instr(s || i, substr(p, 2))"),
    "LIKE '%aaa…ab'": "SELECT count(*) FROM v WHERE s LIKE '%' || substr(replace(p, 'b', 'a'), 1, {plen}) || 'b'",
    "GLOB '*aaa…ab'": "SELECT count(*) FROM v WHERE s GLOB '*' || substr(replace(p, 'b', 'a'), 1, {plen}) || 'b'",
}


def hostile(exponent: int) -> dict[str, str]:
    plen = str(
        min(2 ** (exponent - 2), 40_000)
    )  # the pattern is built by the query: the SQL text stays short
    values = _VALUES.format(e=exponent)
    return {
        **HOSTILE,
        **{name: values + sql.replace("{plen}", plen) for name, sql in FUNCTION_ATTACKS.items()},
    }


ADMIN = 1


def prepare(data_dir: Path, tasks: int) -> str:
    from oracle_rag.callers.tokens import create_token
    from oracle_rag.config import load_settings
    from oracle_rag.demo.seed import seed
    from oracle_rag.system import RagSystem

    with RagSystem(load_settings(env={}, data_dir=str(data_dir))) as rag:
        rag.migrate(demo=True)
        if seed(rag.engine, tasks) is not None:
            print(f"seeded {tasks} tasks", file=sys.stderr)
        return create_token(rag.engine, ADMIN, expires_days=1, label="bench").token


def start_aggregate_server(
    data_dir: Path, llm_url: str, timeout_s: float
) -> tuple[subprocess.Popen[str], str]:
    """The API only (no worker), its model at ``llm_url`` with no retries."""
    return start_server(
        data_dir,
        f'llm_url = "{llm_url}"\nllm_model = "m"\nllm_api_key = "k"\n'
        f"llm_max_retries = 0\naggregate_retries = 0\naggregate_timeout_s = {timeout_s}\n"
        "backfill_on_startup = false\n",
        "--no-worker",
        name="bench-aggregate.toml",
    )


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of ``pid`` so far (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Sampler(threading.Thread):
    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.stop_event = pid, 0.0, threading.Event()

    def run(self) -> None:
        while not self.stop_event.is_set():
            self.peak = max(self.peak, rss_mb(self.pid))
            time.sleep(0.02)


def ask(address: str, token: str) -> tuple[float, int, dict[str, Any]]:
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=300)
    started = time.perf_counter()
    # a question no structured answer takes (a plain count would be answered without the model)
    conn.request(
        "POST",
        "/api/chat",
        body=json.dumps({"question": "count forever"}),
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {token}"},
    )
    response = conn.getresponse()
    body = json.loads(response.read() or b"{}")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed, response.status, body


def run_round(
    address: str, token: str, llm: Any, pid: int, queries: dict[str, str], names: list[str], timeout: float
) -> dict[str, Any]:
    """``names`` at once; each request's outcome, and the server's CPU while they ran."""
    for name in names:
        llm.push_route(AGG_ONLY)
        llm.push(json.dumps({"sql": queries[name]}))
    outcomes: list[Any] = [None] * len(names)

    def one(i: int) -> None:
        outcomes[i] = ask(address, token)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(names))]
    cpu_before, started = cpu_s(pid), time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall, cpu = time.perf_counter() - started, cpu_s(pid) - cpu_before
    by_sql = {sql: name for name, sql in queries.items()}
    results = []
    for elapsed, status, body in outcomes:
        agg = body.get("aggregate") or {}  # the concurrent requests take the scripted replies in any order
        results.append(
            {
                "query": by_sql.get(agg.get("sql") or "", "?"),
                "http_status": status,
                "wall_s": round(elapsed, 3),
                "wall_over_timeout": round(elapsed / timeout, 3),
                "refusal": agg.get("error"),
                "timed_out": agg.get("timed_out"),
            }
        )
    return {
        "wall_s": round(wall, 3),
        "server_cpu_s": round(cpu, 3),
        "server_cpu_over_budget": round(cpu / (len(names) * timeout), 3),
        "queries": results,
    }


def main() -> None:
    from llm_server import ScriptedLLM

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--timeout", type=float, default=5.0, help="aggregate_timeout_s of the server")
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--exponent", type=int, default=19, help="values of 2^N characters (19: 512 KiB)")
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="oracle-rag-aggregate-cost-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    token = prepare(data_dir, args.tasks)
    queries = hostile(args.exponent)
    order = list(queries)
    rounds_n = -(-len(order) // args.parallel)
    names = [order[i % len(order)] for i in range(rounds_n * args.parallel)]
    with ScriptedLLM().start() as llm:
        proc, address = start_aggregate_server(data_dir, llm.url, args.timeout)
        try:
            llm.push_route(AGG_ONLY)
            llm.push(json.dumps({"sql": LEGIT}), "Counts per status.")
            warm_s, warm_status, _ = ask(address, token)
            time.sleep(1.0)
            idle = max(rss_mb(proc.pid) for _ in range(10) if time.sleep(0.05) is None)
            sampler = Sampler(proc.pid)
            sampler.start()
            started = time.perf_counter()
            rounds = [
                run_round(
                    address,
                    token,
                    llm,
                    proc.pid,
                    queries,
                    names[r * args.parallel : (r + 1) * args.parallel],
                    args.timeout,
                )
                for r in range(rounds_n)
            ]
            wall = time.perf_counter() - started
            sampler.stop_event.set()
            sampler.join()
            llm.push_route(AGG_ONLY)
            llm.push(json.dumps({"sql": LEGIT}), "Still here.")
            after_s, after_status, after_body = ask(address, token)
            load_avg = os.getloadavg()
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()

    every = [q for r in rounds for q in r["queries"]]
    worst = max(q["wall_over_timeout"] for q in every)
    worst_cpu = max(r["server_cpu_over_budget"] for r in rounds)
    report: dict[str, Any] = {
        "benchmark": "aggregate_cost",
        "tasks": args.tasks,
        "parallel": args.parallel,
        "timeout_s": args.timeout,
        "exponent": args.exponent,
        "idle_rss_mb": round(idle, 1),
        "peak_rss_mb": round(sampler.peak, 1),
        "peak_over_idle_mb": round(sampler.peak - idle, 1),
        "peak_over_idle_ratio": round(sampler.peak / idle, 3),
        "worst_wall_over_timeout": worst,
        "worst_round_server_cpu_over_budget": worst_cpu,
        "all_requests_wall_s": round(wall, 3),
        "rounds": rounds,
        "warm_up": {"status": warm_status, "wall_s": round(warm_s, 3)},
        "after": {
            "status": after_status,
            "wall_s": round(after_s, 3),
            "rows": (after_body.get("aggregate") or {}).get("rows"),
        },
        "goal_met": sampler.peak - idle <= 300
        and worst <= 1.5
        and worst_cpu <= 1.5
        and after_status == 200
        and all(q["http_status"] == 200 and q["refusal"] for q in every),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_after": [round(x, 2) for x in load_avg],
        },
    }
    print(json.dumps(report, indent=2))
    for q in every:
        print(
            f"{q['query']:<26} {q['wall_s']:>8.2f} s  x{q['wall_over_timeout']:<6} {q['refusal']}",
            file=sys.stderr,
        )
    for i, r in enumerate(rounds, 1):
        print(
            f"round {i}: wall {r['wall_s']:.2f} s, server CPU {r['server_cpu_s']:.2f} s "
            f"(x{r['server_cpu_over_budget']} of parallel x timeout)",
            file=sys.stderr,
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    main()
