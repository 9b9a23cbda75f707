"""SQL-query sources: the cost of a refresh when 1 % of a 100,000-row source changed.

What is measured (real ONNX model, embedding inside SQL, external SQLite file):

* **full-read refresh** (``sync``): read all rows, hash, compare, embed the
  changed ones;
* **incremental refresh** (``updated_at_column``): read all ids plus the rows
  at/after the watermark, embed the changed ones;
* **full re-index**: every row embedded. At ~70-100 embeddings/s a 100k-row
  re-index takes 17-25 minutes, so it is measured on a subset
  (``--full-sample``, default 10,000 rows, a fresh source) and extrapolated
  linearly to all rows; the output labels it ``extrapolated``.

For each refresh: rows read, embedding calls (must equal the changed rows)
and wall time, and the ratio to the (extrapolated) full re-index (goal <= 5 %).

Setup, not measured: the initial 100k-row index is built with a placeholder
embedding runtime (a constant unit vector) so the benchmark does not spend
20 minutes producing the state it starts from; the real runtime is swapped
in before anything is measured. Search quality is not part of this benchmark.

Run: ``.venv/bin/python bench/sources.py`` (about 4-6 minutes on 2 cores;
``--rows 20000 --full-sample 2000`` for a quick look). Writes
``bench/results/sources.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "sources.json"
sys.path.insert(0, str(ROOT))

WORDS = (
    "renewal contract discount invoice migration onboarding outage upgrade pricing support cloud "
    "warehouse security audit training licence renewal roadmap integration billing churn"
).split()
REGIONS = ("EMEA", "AMER", "APAC", None)


def make_source_db(path: Path, rows: int, seed: int = 7) -> None:
    """An external SQLite file with ``rows`` CRM accounts (short notes, ~20 words)."""
    import sqlean

    rng = random.Random(seed)
    con = sqlean.connect(str(path))
    con.execute(
        "CREATE TABLE accounts (account_id INTEGER PRIMARY KEY, account_name TEXT NOT NULL, "
        "notes TEXT NOT NULL, owner_id INTEGER, region TEXT, updated_at TEXT NOT NULL)"
    )
    batch = []
    for i in range(1, rows + 1):
        notes = f"Account {i}: " + " ".join(rng.choice(WORDS) for _ in range(18)) + "."
        batch.append(
            (
                i,
                f"Account {i}",
                notes,
                rng.choice((None, *range(9, 41))),
                rng.choice(REGIONS),
                f"2026-01-01T00:{(i // 60) % 60:02d}:{i % 60:02d}",
            )
        )
        if len(batch) == 10_000:
            con.executemany("INSERT INTO accounts VALUES (?, ?, ?, ?, ?, ?)", batch)
            batch = []
    if batch:
        con.executemany("INSERT INTO accounts VALUES (?, ?, ?, ?, ?, ?)", batch)
    con.commit()
    con.close()


def change_rows(path: Path, ids: list[int], stamp: str, tag: str) -> None:
    import sqlean

    con = sqlean.connect(str(path))
    con.executemany(
        "UPDATE accounts SET notes = notes || ? , updated_at = ? WHERE account_id = ?",
        [(f" Update {tag}: follow-up call booked.", stamp, i) for i in ids],
    )
    con.commit()
    con.close()


class PlaceholderRuntime:
    """Setup only: a constant unit vector, so the 100k-row starting index is cheap to build."""

    def __init__(self) -> None:
        from oracle_rag.embedding import EmbeddingRuntime

        vec = np.zeros(384, dtype=np.float32)
        vec[0] = 1.0
        self._blob = EmbeddingRuntime.to_blob(vec)
        self._vec = vec
        self.calls = 0

    def embed(self, text: str) -> np.ndarray:
        self.calls += 1
        return self._vec

    def to_blob(self, vec: Any) -> bytes:
        return self._blob


def timed(fn: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def run(rows: int, changed_pct: float, full_sample: int, threads: int, work: Path) -> dict[str, Any]:
    import sqlalchemy as sa
    import sqlean

    from oracle_rag.config import load_settings
    from oracle_rag.embedding import EmbeddingRuntime, ensure_model
    from oracle_rag.indexing.refresh import SourceRefresher
    from oracle_rag.sources import SqlSource, bind_connection
    from oracle_rag.system import RagSystem

    db = work / "crm.db"
    print(f"generating {rows:,} rows in {db} ...", flush=True)
    make_source_db(db, rows)
    settings = load_settings(env={}, data_dir=str(work / "data"), embedding_threads=threads)
    real = EmbeddingRuntime(ensure_model(settings.data_path), threads=threads).load()
    rag = RagSystem(settings)
    rag.migrate()
    ext = sa.create_engine(f"sqlite:///{db}", module=sqlean)
    query = (
        "SELECT account_id AS id, notes AS content, account_name AS title, owner_id, region, updated_at "
        "FROM accounts"
    )
    big = SqlSource(
        "crm",
        query,
        connection="crm",
        owner_column="owner_id",
        updated_at_column="updated_at",
        max_rows=1_000_000,
        fetch_size=5_000,
        refresh="1m",
    )
    sample = SqlSource(
        "crm-sample",
        query + f" WHERE account_id <= {full_sample}",
        connection="crm",
        owner_column="owner_id",
        max_rows=1_000_000,
        fetch_size=5_000,
    )
    out: dict[str, Any] = {"rows": rows, "changed_pct": changed_pct, "embedding_threads": threads}
    with bind_connection("crm", ext):
        refresher = SourceRefresher(rag.engine, [big, sample])
        print("setup: initial index with the placeholder runtime (not measured) ...", flush=True)
        rag.engine.set_runtime(PlaceholderRuntime())
        (load,), setup_s = timed(lambda: refresher.sync("crm"))
        assert load.outcome == "changed" and load.documents == rows, load.summary()
        out["setup_initial_index_s"] = round(setup_s, 1)
        rag.engine.set_runtime(real)

        rng = random.Random(11)
        n_changed = max(1, round(rows * changed_pct / 100))
        pool = list(range(1, rows + 1))
        rng.shuffle(pool)
        first, second = sorted(pool[:n_changed]), sorted(pool[n_changed : 2 * n_changed])

        change_rows(db, first, "2026-06-01T00:00:00", "A")
        print(f"measuring a full-read refresh with {n_changed:,} changed rows ...", flush=True)
        before = real.calls
        full_read, full_read_s = timed(lambda: refresher.refresh("crm", full=True))
        out["full_read_refresh"] = {
            "rows_read": full_read.rows_read,
            "embedding_calls": real.calls - before,
            "changed_rows": n_changed,
            "seconds": round(full_read_s, 2),
            "outcome": full_read.summary(),
        }
        assert real.calls - before == n_changed == full_read.embedded, full_read.summary()

        change_rows(db, second, "2026-07-01T00:00:00", "B")
        print(f"measuring an incremental refresh with {n_changed:,} changed rows ...", flush=True)
        before = real.calls
        incremental, incremental_s = timed(lambda: refresher.refresh("crm", full=False))
        assert incremental.mode == "incremental", incremental.summary()
        out["incremental_refresh"] = {
            "rows_read": incremental.rows_read,
            "embedding_calls": real.calls - before,
            "changed_rows": n_changed,
            "seconds": round(incremental_s, 2),
            "outcome": incremental.summary(),
        }
        assert real.calls - before == n_changed == incremental.embedded, incremental.summary()

        before = real.calls
        again, again_s = timed(lambda: refresher.refresh("crm", full=True))
        out["no_change_refresh"] = {
            "rows_read": again.rows_read,
            "embedding_calls": real.calls - before,
            "seconds": round(again_s, 2),
        }

        print(f"measuring a full index of {full_sample:,} rows (real embeddings) ...", flush=True)
        before = real.calls
        (sampled,), sample_s = timed(lambda: refresher.sync("crm-sample"))
        assert sampled.embedded == full_sample == real.calls - before, sampled.summary()
        extrapolated = sample_s * rows / full_sample
        out["full_reindex"] = {
            "measured_rows": full_sample,
            "measured_seconds": round(sample_s, 1),
            "embeddings_per_s": round(full_sample / sample_s, 1),
            "extrapolated_rows": rows,
            "extrapolated_seconds": round(extrapolated, 1),
            "note": f"extrapolated linearly from {full_sample:,} rows",
        }
        out["full_read_refresh"]["ratio_to_full_reindex_extrapolated"] = round(full_read_s / extrapolated, 4)
        out["incremental_refresh"]["ratio_to_full_reindex_extrapolated"] = round(
            incremental_s / extrapolated, 4
        )
        refresher.close()
    ext.dispose()
    rag.close()
    out["goal"] = "refresh time <= 5% of a full re-index; embedding calls == changed rows"
    out["goal_met"] = (
        out["full_read_refresh"]["ratio_to_full_reindex_extrapolated"] <= 0.05
        and out["incremental_refresh"]["ratio_to_full_reindex_extrapolated"] <= 0.05
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--changed-pct", type=float, default=1.0)
    parser.add_argument("--full-sample", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=1, help="onnxruntime intra-op threads (default 1)")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    if not 1 <= args.full_sample <= args.rows:
        parser.error("--full-sample must be in [1, --rows]")
    with tempfile.TemporaryDirectory(prefix="oracle-rag-bench-sources-") as tmp:
        started = time.time()
        result = run(args.rows, args.changed_pct, args.full_sample, args.threads, Path(tmp))
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "total_run_s": round(time.time() - started, 1),
    }
    fr, inc, full = result["full_read_refresh"], result["incremental_refresh"], result["full_reindex"]
    print(f"\nsource: {result['rows']:,} rows, {fr['changed_rows']:,} changed ({result['changed_pct']}%)")
    print(
        f"full re-index:        {full['extrapolated_seconds']:>8.1f} s  (EXTRAPOLATED from "
        f"{full['measured_rows']:,} rows in {full['measured_seconds']} s, {full['embeddings_per_s']} emb/s)"
    )
    for label, r in (("full-read refresh", fr), ("incremental refresh", inc)):
        print(
            f"{label + ':':<21} {r['seconds']:>8.2f} s  rows read {r['rows_read']:>7,}  embedding calls "
            f"{r['embedding_calls']:>5,}  = {100 * r['ratio_to_full_reindex_extrapolated']:.2f}% of a full re-index"
        )
    nc = result["no_change_refresh"]
    print(
        f"unchanged refresh:    {nc['seconds']:>8.2f} s  rows read {nc['rows_read']:>7,}  embedding calls "
        f"{nc['embedding_calls']:>5,}"
    )
    print(f"goal met: {result['goal_met']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
