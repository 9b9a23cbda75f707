"""Hybrid fusion: plain RRF against score-normalised fusion, on Cranfield and on the help desk.

Both legs of hybrid search (semantic: cosine distance; keyword: BM25) are fetched once per query,
``--depth`` deep, from the product's engine on one index per collection, then fused in Python:

* ``rrf``: the product's :func:`oracle_rag.search.fusion.rrf` (k = 60 and the configured ``rrf_k``);
* ``minmax``: each leg's scores scaled to [0, 1] over the records it returned (a record a leg did
  not return scores 0 there), then ``alpha * semantic + (1 - alpha) * keyword`` (here only);
* ``zscore``: the product's :class:`oracle_rag.search.fusion.ScoreFusion` (``hybrid_fusion = ZSCORE``):
  each leg's scores standardised over what it returned (a record it did not return gets the leg's
  lowest), then the same convex combination.

The collections: Cranfield 1400 (``bench/data/cranfield``, 225 queries, graded judgements: nDCG@10,
Recall@100) and the help desk of ``bench/qa_open.py`` (its 65 questions that some record answers:
MRR@10 and an answering record in the top 3, all and held out). The fusion method and its ``alpha``
are chosen on one collection (``--choose-on``, Cranfield by default: 225 judged queries) and
reported on the other, next to the best leg and plain RRF measured in the same run.

Run: ``.venv/bin/python bench/fusion_quality.py [--choose-on cranfield|helpdesk]`` (indexing
Cranfield takes 1-3 minutes on 2 cores). Writes ``bench/results/fusion_quality.json``.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "fusion_quality.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import qa_open  # noqa: E402

from oracle_rag.callers.access import directory_for  # noqa: E402
from oracle_rag.config import load_settings  # noqa: E402
from oracle_rag.engines import Filters  # noqa: E402
from oracle_rag.engines.records import Hit  # noqa: E402
from oracle_rag.evaluation import (  # noqa: E402
    DOCUMENT_TYPE,
    EVAL_CALLER,
    indexed_collection,
    load_dataset,
    score_runs,
)
from oracle_rag.search.fusion import ScoreFusion, rrf  # noqa: E402
from oracle_rag.search.hybrid import semantic_leg_filters  # noqa: E402

Legs = dict[str, list[Hit]]
Key = tuple[str, str]
ALPHAS = tuple(round(0.1 * i, 1) for i in range(1, 10))


def _similarity(leg: str, hit: Hit) -> float:
    """Higher is better in both legs: the semantic leg's distance negated, BM25 as it is."""
    return -hit.score if leg == "semantic" else hit.score


def normalised(legs: Legs, how: str) -> dict[str, dict[Key, float]]:
    """Each leg's records with their scores scaled (``minmax``) or standardised (``zscore``), and the
    value a record the leg did not return gets (under the key ``("", "")``)."""
    out: dict[str, dict[Key, float]] = {}
    for leg, hits in legs.items():
        raw = {(h.source_type, h.source_id): _similarity(leg, h) for h in hits}
        if not raw:
            out[leg] = {("", ""): 0.0}
            continue
        values = list(raw.values())
        if how == "minmax":
            low, high = min(values), max(values)
            span = high - low
            scaled = {k: (v - low) / span if span > 0 else 1.0 for k, v in raw.items()}
            scaled[("", "")] = 0.0
        else:
            mean = statistics.fmean(values)
            spread = statistics.pstdev(values) or 1.0
            scaled = {k: (v - mean) / spread for k, v in raw.items()}
            scaled[("", "")] = min(scaled.values())
        out[leg] = scaled
    return out


def convex(legs: Legs, how: str, alpha: float, k: int) -> list[Key]:
    """The k best records by ``alpha * semantic + (1 - alpha) * keyword`` of the normalised scores;
    ties: the better semantic score, then the key."""
    scores = normalised(legs, how)
    sem, kw = scores["semantic"], scores["keyword"]
    keys = {k_ for k_ in (*sem, *kw) if k_ != ("", "")}
    fused = {
        key: alpha * sem.get(key, sem[("", "")]) + (1 - alpha) * kw.get(key, kw[("", "")]) for key in keys
    }
    return sorted(keys, key=lambda key: (-fused[key], -sem.get(key, sem[("", "")]), key))[:k]


def methods(rrf_k: int) -> dict[str, Callable[[Legs, int], list[Key]]]:
    out: dict[str, Callable[[Legs, int], list[Key]]] = {
        "semantic": lambda legs, k: [(h.source_type, h.source_id) for h in legs["semantic"][:k]],
        "keyword": lambda legs, k: [(h.source_type, h.source_id) for h in legs["keyword"][:k]],
        "rrf k=60": lambda legs, k: [(h.source_type, h.source_id) for h in rrf(legs, k, 60, {})],
    }
    if rrf_k != 60:
        out[f"rrf k={rrf_k}"] = lambda legs, k: [
            (h.source_type, h.source_id) for h in rrf(legs, k, rrf_k, {})
        ]
    for alpha in ALPHAS:
        out[f"minmax alpha={alpha}"] = (lambda a: lambda legs, k: convex(legs, "minmax", a, k))(alpha)
    for alpha in ALPHAS:  # the product's own (hybrid_fusion = ZSCORE, hybrid_alpha)
        out[f"zscore alpha={alpha}"] = (
            lambda a: lambda legs, k: [(h.source_type, h.source_id) for h in ScoreFusion(legs, a).top(k)]
        )(alpha)
    return out


def cranfield_legs(depth: int) -> tuple[dict[str, Legs], Any]:
    settings = load_settings()
    data = load_dataset(ROOT / "bench" / "data" / "cranfield")
    scope, filters = EVAL_CALLER.scope(), Filters(source_types=(DOCUMENT_TYPE,))
    legs: dict[str, Legs] = {}
    with indexed_collection(settings, data) as (rag, _), rag.engine.connect() as conn:
        for qid in data.judged_queries:
            text = data.queries[qid]
            legs[qid] = {
                "semantic": rag.engine.semantic_search(
                    conn, text, depth, scope, semantic_leg_filters(settings, filters)
                ),
                "keyword": rag.engine.keyword_search(conn, text, depth, scope, filters),
            }
    return legs, data


def helpdesk_legs(depth: int, data_dir: Path) -> tuple[dict[str, Legs], list[dict[str, Any]]]:
    questions = [
        q for q in json.loads(qa_open.QUESTIONS.read_text(encoding="utf-8"))["questions"] if q["answers"]
    ]
    rag = qa_open.prepare(data_dir)
    try:
        with rag.engine.connect() as conn:
            caller = directory_for(rag.engine).load(conn, qa_open.ASKER)
            scope, filters = caller.scope(), Filters()
            legs = {
                q["id"]: {
                    "semantic": rag.engine.semantic_search(
                        conn, q["question"], depth, scope, semantic_leg_filters(rag.settings, filters)
                    ),
                    "keyword": rag.engine.keyword_search(conn, q["question"], depth, scope, filters),
                }
                for q in questions
            }
    finally:
        rag.close()
    return legs, questions


def score_cranfield(
    legs: dict[str, Legs], data: Any, fuse: Callable[[Legs, int], list[Key]]
) -> dict[str, float]:
    runs = {qid: [key[1] for key in fuse(found, 100)] for qid, found in legs.items()}
    return {k: round(v, 4) for k, v in score_runs(runs, data.qrels).items()}


def score_helpdesk(
    legs: dict[str, Legs], questions: list[dict[str, Any]], fuse: Callable[[Legs, int], list[Key]]
) -> dict[str, float]:
    rows = []
    for q in questions:
        anchors = [f"{t.upper()} #{i.split('#', 1)[-1]}" for t, i in fuse(legs[q["id"]], 10)]
        ranks = [n for n, a in enumerate(anchors, 1) if a in q["answers"]]
        rows.append(
            (q["held_out"], 1.0 / ranks[0] if ranks else 0.0, 1.0 if ranks and ranks[0] <= 3 else 0.0)
        )
    held = [r for r in rows if r[0]]
    return {
        "mrr@10": round(statistics.fmean(r[1] for r in rows), 4),
        "record@3": round(statistics.fmean(r[2] for r in rows), 4),
        "held_out mrr@10": round(statistics.fmean(r[1] for r in held), 4),
        "held_out record@3": round(statistics.fmean(r[2] for r in held), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--depth", type=int, default=100, help="records fetched per leg")
    parser.add_argument("--choose-on", default="cranfield", choices=("cranfield", "helpdesk"))
    parser.add_argument("--data-dir", default=str(ROOT / ".oracle-rag" / "bench-qa-open"))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    started = time.perf_counter()
    rrf_k = load_settings().rrf_k
    fusions = methods(rrf_k)
    desk, questions = helpdesk_legs(args.depth, Path(args.data_dir))
    cran, data = cranfield_legs(args.depth)
    results = {
        "cranfield": {name: score_cranfield(cran, data, fuse) for name, fuse in fusions.items()},
        "helpdesk": {name: score_helpdesk(desk, questions, fuse) for name, fuse in fusions.items()},
    }
    primary = {"cranfield": "ndcg@10", "helpdesk": "mrr@10"}
    chooser, other = args.choose_on, "helpdesk" if args.choose_on == "cranfield" else "cranfield"
    normalised_names = [n for n in fusions if n.startswith(("minmax", "zscore"))]
    chosen = max(normalised_names, key=lambda n: (results[chooser][n][primary[chooser]], n))
    for collection in ("cranfield", "helpdesk"):
        metric = primary[collection]
        print(f"\n{collection} ({metric}):")
        for name in fusions:
            mark = "  <- chosen on " + chooser if name == chosen else ""
            print(
                f"  {name:<18} "
                + "  ".join(f"{k} {v:.4f}" for k, v in results[collection][name].items())
                + mark
            )
    summary = {}
    for collection in ("cranfield", "helpdesk"):
        metric = primary[collection]
        row = results[collection]
        best_leg = max(("semantic", "keyword"), key=lambda n: row[n][metric])
        summary[collection] = {
            "chosen": row[chosen][metric],
            "rrf k=60": row["rrf k=60"][metric],
            f"best leg ({best_leg})": row[best_leg][metric],
            "chosen >= max(rrf, best leg)": row[chosen][metric]
            >= max(row["rrf k=60"][metric], row[best_leg][metric]),
        }
    print(f"\nchosen on {chooser}: {chosen}; reported on {other}: {summary[other]}")
    print(f"on {chooser} itself: {summary[chooser]}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "bench": "fusion_quality",
                "depth": args.depth,
                "choose_on": chooser,
                "chosen": chosen,
                "summary": summary,
                "results": results,
                "seconds": round(time.perf_counter() - started, 1),
                "python": platform.python_version(),
            },
            indent=2,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
