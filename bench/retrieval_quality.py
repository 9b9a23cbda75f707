"""Retrieval quality on Cranfield 1400 against the baselines in its SOURCE.md.

Runs :func:`oracle_rag.evaluation.run_eval` (the same code as ``oracle-rag
eval``: the corpus indexed through the queue and the worker, embedded in the
database, searched through ``Retriever`` as a developer) on
``bench/data/cranfield`` and prints nDCG@10 and Recall@100 per mode next to
the baselines measured outside the product (bm25s, sentence-transformers
exact cosine, RRF of the two), parsed from ``SOURCE.md``.

Goals: semantic within 0.005 of the exact-cosine baseline (the pipeline --
model, in-database embedding, scope SQL, exact scan -- adds no error);
keyword >= 0.35; hybrid >= 0.41 and >= the RRF baseline of SOURCE.md.

The baselines' "RRF" fuses two record lists: BM25 over each record and
dense retrieval of each record as the model reads it (its first 256
wordpieces). The run also fuses the product's own lists that way
(``details.rrf_reference`` of :func:`~oracle_rag.evaluation.run_eval`:
plain RRF k=60 of the keyword run with the first-window semantic run, and
with semantic mode's nearest-chunk run), so hybrid is compared with the
fusion of its legs measured in the same run, not only with numbers measured
elsewhere. With ``hybrid_semantic_chunk = FIRST`` hybrid fuses the first
pair by construction.

``--sweep`` indexes the collection once more and reports how hybrid moves
with the chunk that ranks a record in the semantic leg
(``hybrid_semantic_chunk``), the per-leg fetch depth, ``rrf_k`` and the leg
weights, fused in Python
with the product's ``rrf`` from legs fetched at the deepest setting. It is a
sensitivity study on the test set itself, not a tuning step: defaults are
not chosen from it.

Run: ``.venv/bin/python bench/retrieval_quality.py [--sweep]`` (indexing takes
1-3 minutes on 2 cores; ``--sweep`` doubles it). Writes
``bench/results/retrieval_quality.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATASET = ROOT / "bench" / "data" / "cranfield"
RESULTS = ROOT / "bench" / "results" / "retrieval_quality.json"
sys.path.insert(0, str(ROOT))

from oracle_rag.config import Settings, load_settings  # noqa: E402
from oracle_rag.engines import Filters  # noqa: E402
from oracle_rag.evaluation import (  # noqa: E402
    DOCUMENT_TYPE,
    EVAL_CALLER,
    RECALL_AT,
    indexed_collection,
    load_dataset,
    run_eval,
    score_runs,
)
from oracle_rag.search.fusion import rrf  # noqa: E402
from oracle_rag.search.hybrid import semantic_leg_filters  # noqa: E402
from oracle_rag.search.results import MAX_K  # noqa: E402

MODES = ("semantic", "keyword", "hybrid")
# SOURCE.md table rows -> our modes.
BASELINE_ROWS = {
    "keyword": r"BM25 \(bm25s",
    "semantic": r"Dense all-MiniLM-L6-v2, exact cosine",
    "hybrid": r"RRF \(k=60\)",
}
SEMANTIC_TOLERANCE = 0.005
GOALS = {"keyword": 0.35, "hybrid": 0.41}


def baselines(source_md: Path) -> dict[str, dict[str, float]]:
    """The measured baselines, read from the dataset's SOURCE.md table."""
    text = source_md.read_text(encoding="utf-8")
    out = {}
    for mode, label in BASELINE_ROWS.items():
        m = re.search(
            r"^\|\s*" + label + r"[^|]*\|\s*\**([\d.]+)\**\s*\|\s*\**([\d.]+)\**\s*\|", text, re.MULTILINE
        )
        if m is None:
            raise SystemExit(f"{source_md}: baseline row for {mode!r} not found")
        out[mode] = {"ndcg@10": float(m.group(1)), "recall@100": float(m.group(2))}
    return out


OWN_RRF = "keyword+semantic_first_window"  # details.rrf_reference: what hybrid fuses


def goal_check(result: dict[str, Any], base: dict[str, dict[str, float]]) -> dict[str, dict[str, Any]]:
    sem = result["semantic"]["ndcg@10"]
    checks = {
        "semantic": {
            "goal": f"|nDCG@10 - {base['semantic']['ndcg@10']}| <= {SEMANTIC_TOLERANCE}",
            "met": abs(sem - base["semantic"]["ndcg@10"]) <= SEMANTIC_TOLERANCE,
        }
    }
    for mode, floor in GOALS.items():
        checks[mode] = {"goal": f"nDCG@10 >= {floor}", "met": result[mode]["ndcg@10"] >= floor}
    hybrid, own = result["hybrid"]["ndcg@10"], result["details"]["rrf_reference"][OWN_RRF]["ndcg@10"]
    checks["hybrid_vs_rrf"] = {
        "goal": f"hybrid nDCG@10 >= the RRF baseline {base['hybrid']['ndcg@10']} and >= the plain RRF of "
        f"its own lists in this run ({own:.4f})",
        "met": hybrid >= base["hybrid"]["ndcg@10"] and hybrid >= own - 1e-12,
    }
    return checks


def sweep(settings: Settings, dataset: Path) -> dict[str, Any]:
    """Hybrid under other fetch depths, rrf_k and weights, on one index."""
    data = load_dataset(dataset)
    judged = data.judged_queries
    scope, filters = EVAL_CALLER.scope(), Filters(source_types=(DOCUMENT_TYPE,))
    deepest = 4 * MAX_K
    legs: dict[str, dict[str, Any]] = {}
    with indexed_collection(settings, data) as (rag, _):
        with rag.engine.connect() as conn:
            for qid in judged:
                text = data.queries[qid]
                legs[qid] = {
                    "semantic": rag.engine.semantic_search(
                        conn, text, deepest, scope, semantic_leg_filters(settings, filters)
                    ),
                    "keyword": rag.engine.keyword_search(conn, text, deepest, scope, filters),
                }
                other = settings.with_overrides(
                    hybrid_semantic_chunk="NEAREST" if settings.hybrid_semantic_chunk == "FIRST" else "FIRST"
                )
                legs[qid]["semantic " + other.hybrid_semantic_chunk] = rag.engine.semantic_search(
                    conn, text, deepest, scope, semantic_leg_filters(other, filters)
                )

    def fused(
        depth: int, rrf_k: int, w_sem: float, w_kw: float, semantic: str = "semantic"
    ) -> dict[str, float]:
        runs = {}
        for qid, found in legs.items():
            both = {"semantic": found[semantic], "keyword": found["keyword"]}
            hits = rrf(
                {leg: h[:depth] for leg, h in both.items()},
                RECALL_AT,
                rrf_k,
                {"semantic": w_sem, "keyword": w_kw},
            )
            runs[qid] = [h.source_id for h in hits]
        return {k: round(v, 4) for k, v in score_runs(runs, data.qrels).items()}

    base_k, base_ws, base_wk = settings.rrf_k, settings.semantic_weight, settings.keyword_weight
    base_depth = min(max(RECALL_AT, settings.hybrid_depth), deepest)
    out: dict[str, Any] = {"semantic_chunk": {}, "fetch_factor": {}, "rrf_k": {}, "weights": {}}
    for name in sorted(legs[judged[0]]):
        if name.startswith("semantic "):
            out["semantic_chunk"][name.split()[1]] = fused(base_depth, base_k, base_ws, base_wk, name)
    out["semantic_chunk"][settings.hybrid_semantic_chunk] = fused(base_depth, base_k, base_ws, base_wk)
    for factor in (1, 2, 4):
        depth = min(max(RECALL_AT * factor, RECALL_AT), deepest)
        out["fetch_factor"][str(factor)] = fused(depth, base_k, base_ws, base_wk)
    for rrf_k in (10, 30, 60, 100):
        out["rrf_k"][str(rrf_k)] = fused(deepest, rrf_k, base_ws, base_wk)
    for ws, wk in ((1.0, 0.5), (1.0, 0.8), (1.0, 1.0), (0.8, 1.0), (0.5, 1.0)):
        out["weights"][f"semantic={ws},keyword={wk}"] = fused(deepest, base_k, ws, wk)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument(
        "--sweep", action="store_true", help="Also report hybrid's sensitivity to its parameters."
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()

    settings = load_settings()
    base = baselines(args.dataset / "SOURCE.md")

    def progress(what: str, done: int, total: int) -> None:
        if done == total or done % 200 == 0:
            print(f"  {what} {done}/{total}", file=sys.stderr)

    started = time.perf_counter()
    result = run_eval(settings, args.dataset, progress=progress)
    seconds = time.perf_counter() - started
    checks = goal_check(result, base)

    print(
        f"\nCranfield: {result['documents']} documents, {result['queries']} queries "
        f"({seconds:.0f} s; indexing {result['details']['index_seconds']:.0f} s)"
    )
    print(
        f"{'mode':<9} {'nDCG@10':>8} {'baseline':>9} {'diff':>8}   {'R@100':>7} {'baseline':>9} {'diff':>8}  goal"
    )
    for mode in MODES:
        ours, ref = result[mode], base[mode]
        print(
            f"{mode:<9} {ours['ndcg@10']:>8.4f} {ref['ndcg@10']:>9.4f} {ours['ndcg@10'] - ref['ndcg@10']:>+8.4f}   "
            f"{ours['recall@100']:>7.4f} {ref['recall@100']:>9.4f} {ours['recall@100'] - ref['recall@100']:>+8.4f}  "
            f"{'met' if checks[mode]['met'] else 'MISSED'} ({checks[mode]['goal']})"
        )
    details = result["details"]
    print(
        "\nthis run's own lists (plain RRF k=60, top-100, ties by id; hybrid_semantic_chunk = "
        f"{details['hybrid_semantic_chunk']}):"
    )
    first = details["semantic_first_window"]
    print(
        f"  semantic, each record by its first window   nDCG@10 {first['ndcg@10']:.4f}  R@100 {first['recall@100']:.4f}"
    )
    for name, m in details["rrf_reference"].items():
        print(
            f"  RRF {name:<38} nDCG@10 {m['ndcg@10']:.4f}  R@100 {m['recall@100']:.4f}  "
            f"hybrid - it {result['hybrid']['ndcg@10'] - m['ndcg@10']:+.4f}"
        )
    rrf_goal = checks["hybrid_vs_rrf"]
    print(f"{'met' if rrf_goal['met'] else 'MISSED'}: {rrf_goal['goal']}")

    report: dict[str, Any] = {
        "dataset": str(args.dataset.relative_to(ROOT) if args.dataset.is_relative_to(ROOT) else args.dataset),
        "result": result,
        "baselines": base,
        "differences": {
            m: {k: round(result[m][k] - base[m][k], 4) for k in ("ndcg@10", "recall@100")} for m in MODES
        },
        "goals": checks,
        "seconds": round(seconds, 1),
        "environment": {"python": platform.python_version(), "engine": settings.engine_kind},
    }
    if args.sweep:
        print(
            "\nhybrid sensitivity (same index; on the test set itself, not used to pick defaults):",
            file=sys.stderr,
        )
        report["hybrid_sweep"] = sweep(settings, args.dataset)
        for group, rows in report["hybrid_sweep"].items():
            for name, m in rows.items():
                print(f"  {group:<12} {name:<26} nDCG@10 {m['ndcg@10']:.4f}  R@100 {m['recall@100']:.4f}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
