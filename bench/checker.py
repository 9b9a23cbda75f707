"""The answer checker on labelled sentences: is a sentence that names a record supported by it?

``bench/data/checker/sentences.txt`` holds sentences a model might write about the help desk of
``bench/data/helpdesk`` and the demo (seed 42), each labelled supported or not by the records it
names: paraphrases, Spanish sentences, Spanish sentences about English records, and the ways a
model goes wrong (a true claim cited to another record, a claim about a topic the record does not
mention, a swapped number, a swapped person, a negation). Each sentence is checked the way an
answer's sentence is (``oracle_rag.answering.chat.checking.check_sentence``), against evidence holding the
records it names as the model would have read them (their indexed text, their facets), with the
deployment's embedding model in this process.

Printed and written to ``bench/results/checker.json``: the precision of "supported" (of the
sentences kept, the share truly supported) and its recall (of the truly supported, the share kept),
for all sentences and for the held-out ones (whose first named record's id is a multiple of 3: never
used to choose the thresholds), per kind, and the baseline measured in the same run: the checker
without claims (numbers, anchors and facet values, as it was).

``--tune`` searches the thresholds of ``oracle_rag.answering.chat.support`` on the sentences that are not held
out and prints the best (precision >= 0.95 first, then recall); the product's values are set by hand
from it.

Also printed: the worst CPU time of checking one reply of 2,048 characters (llm_max_tokens x 4) shaped to
make the claim check work (every sentence compared by meaning, an endless sentence, runs of
negations), against ordinary prose of the same size.

Run: ``.venv/bin/python bench/checker.py [--data-dir DIR] [--verbose] [--tune]`` (the first run
indexes the help desk, about 20 s; later runs reuse the data directory).
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import platform
import re
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SENTENCES = ROOT / "bench" / "data" / "checker" / "sentences.txt"
RESULTS = ROOT / "bench" / "results" / "checker.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import qa_open  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from crosslang_demo import task_row  # noqa: E402

from oracle_rag.answering.chat import Chat  # noqa: E402
from oracle_rag.answering.chat import support as support_module  # noqa: E402
from oracle_rag.answering.chat.checking import (  # noqa: E402
    SentenceChecker,
    check_sentence,
    check_text,
    evidence_from,
)
from oracle_rag.answering.chat.evidence import anchor_key  # noqa: E402
from oracle_rag.answering.structured.vocabulary import build_vocabulary  # noqa: E402
from oracle_rag.demo.seed import generate  # noqa: E402
from oracle_rag.sources.meanings import Declaration  # noqa: E402
from oracle_rag.sources.reference import TaskSource, render_task  # noqa: E402

_LINE = re.compile(r"^([+-]) (\w+) \| (.+)$")
_NAMED = re.compile(r"\[([A-Z]+) #(\d+)\]")
DEMO_TASKS, DEMO_SEED, DEMO_DAY = 300, 42, dt.date(2026, 3, 11)  # the tests' demo (tests/conftest.py)


@dataclass(frozen=True)
class Item:
    supported: bool
    kind: str
    sentence: str
    named: tuple[tuple[str, str], ...]
    held_out: bool


def load(path: Path) -> list[Item]:
    items = []
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip() or raw.startswith("#"):
            continue
        m = _LINE.match(raw)
        if m is None:
            raise SystemExit(f"{path}:{number}: not '+|- kind | sentence': {raw!r}")
        named = tuple(dict.fromkeys((t, i) for t, i in _NAMED.findall(m.group(3))))
        if not named:
            raise SystemExit(f"{path}:{number}: the sentence names no record")
        items.append(Item(m.group(1) == "+", m.group(2), m.group(3), named, int(named[0][1]) % 3 == 0))
    return items


class Corpus:
    """The records the sentences name: their text, facets and title; the vocabulary; the embedder."""

    def __init__(self, data_dir: Path) -> None:
        self.rag = qa_open.prepare(data_dir)
        chat = Chat(self.rag, None)
        assert chat.answers is not None
        with self.rag.engine.connect() as conn:
            caller = qa_open.directory_for(self.rag.engine).load(conn, qa_open.ASKER)
            rows = conn.execute(
                sa.text(
                    "SELECT SOURCE_TYPE, SOURCE_ID, CHUNK_NO, FACETS, CONTENT FROM RAG_CHUNK "
                    "ORDER BY SOURCE_TYPE, SOURCE_ID, CHUNK_NO"
                )
            ).fetchall()
        self.vocab = chat.answers.parser(caller.scope()).vocab
        texts: dict[tuple[str, str], list[str]] = defaultdict(list)
        self.facets: dict[tuple[str, str], dict[str, Any]] = {}
        for source_type, source_id, _, facets, content in rows:
            key = anchor_key(self.vocab.anchor_of(source_type, source_id))
            texts[key].append(content)
            self.facets[key] = json.loads(facets or "{}")
        self.texts = {k: "\n".join(v) for k, v in texts.items()}
        self._demo()
        self.cache: dict[str, Any] = {}
        self.embed_calls = 0

    def _demo(self) -> None:
        data = generate(DEMO_TASKS, DEMO_SEED, DEMO_DAY)
        people = {e["id"]: (e["first"], e["last"]) for e in data["employees"]}
        sprints = {s["id"]: s["name"] for s in data["sprints"]}
        projects = {p["id"]: p["name"] for p in data["projects"]}
        names = {i: f"{f} {last}" for i, (f, last) in people.items()}
        self.demo_vocab = build_vocabulary(
            [Declaration("TASK", tuple(TaskSource.facets), TaskSource.meanings)],
            {
                "status": {t["status"] for t in data["tasks"]},
                "priority": {t["priority"] for t in data["tasks"]},
            },
            {"assignee_id": names},
        )
        for t in data["tasks"]:
            row = task_row(t, people.get(t["assignee"], (None, None)), sprints, projects)
            comments = [
                {"FIRST_NAME": people[c["author"]][0], "LAST_NAME": people[c["author"]][1], "BODY": c["body"]}
                for c in data["comments"]
                if c["task"] == t["id"]
            ]
            key = ("TASK", str(t["id"]))
            self.texts[key] = render_task(row, comments)
            self.facets[key] = {
                "status": t["status"],
                "priority": t["priority"],
                "assignee_id": t["assignee"],
            }

    def embed(self, texts: Any) -> Any:
        """The engine's embedder, each text embedded once per run (tuning asks for the same texts again)."""
        import numpy as np

        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            self.embed_calls += 1
            for t, v in zip(missing, self.rag.engine.embed_many(missing, "passage"), strict=True):
                self.cache[t] = v
        return np.stack([self.cache[t] for t in texts])

    def verdict(self, item: Item, claims: bool = True) -> Any:
        for key in item.named:
            if key not in self.texts:
                raise SystemExit(f"{item.sentence!r}: no record {key}")
        vocab = self.demo_vocab if item.named[0][0] == "TASK" else self.vocab
        records = {k: (self.facets[k], self.texts[k].split("\n", 1)[0]) for k in item.named}
        evidence = evidence_from(
            [self.texts[k] for k in item.named],
            records=records,
            vocab=vocab,
            cite=True,
            record_texts={k: self.texts[k] for k in item.named} if claims else None,
            embed=self.embed,
        )
        return check_sentence(item.sentence, evidence)


def measure(corpus: Corpus, items: list[Item], claims: bool = True) -> list[dict[str, Any]]:
    rows = []
    for item in items:
        v = corpus.verdict(item, claims)
        rows.append(
            {
                "sentence": item.sentence,
                "kind": item.kind,
                "supported": item.supported,
                "held_out": item.held_out,
                "kept": v.ok,
                "reason": v.reason,
            }
        )
    return rows


def scores(rows: list[dict[str, Any]]) -> dict[str, Any]:
    kept = [r for r in rows if r["kept"]]
    true = [r for r in rows if r["supported"]]
    hits = sum(1 for r in kept if r["supported"])
    return {
        "sentences": len(rows),
        "supported": len(true),
        "kept": len(kept),
        "precision": round(hits / len(kept), 4) if kept else 1.0,
        "recall": round(hits / len(true), 4) if true else 1.0,
    }


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    kinds = sorted({r["kind"] for r in rows})
    per_kind = {}
    for k in kinds:
        mine = [r for r in rows if r["kind"] == k]
        per_kind[k] = {
            "sentences": len(mine),
            "right": round(sum(r["kept"] == r["supported"] for r in mine) / len(mine), 4),
        }
    return {
        "all": scores(rows),
        "held_out": scores([r for r in rows if r["held_out"]]),
        "tuning": scores([r for r in rows if not r["held_out"]]),
        "per_kind": per_kind,
        "removed_because": dict(Counter(r["reason"] for r in rows if not r["kept"])),
    }


def tune(corpus: Corpus, items: list[Item]) -> list[dict[str, Any]]:
    """Grid over the thresholds on the tuning sentences only: the best by precision >= 0.95, then recall."""
    tuning = [i for i in items if not i.held_out]
    saved = {n: getattr(support_module, n) for n in ("MIN_COVERAGE", "SURE_COVERAGE", "MIN_SIMILARITY")}
    found = []
    try:
        for cov, sure, sim in itertools.product(
            (0.4, 0.5, 0.55, 0.6, 0.67, 0.75),
            (0.75, 0.8, 0.85, 0.9, 1.01),
            (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7),
        ):
            if sure <= cov:
                continue
            support_module.MIN_COVERAGE, support_module.SURE_COVERAGE, support_module.MIN_SIMILARITY = (
                cov,
                sure,
                sim,
            )
            s = scores(measure(corpus, tuning))
            found.append({"MIN_COVERAGE": cov, "SURE_COVERAGE": sure, "MIN_SIMILARITY": sim, **s})
    finally:
        for n, v in saved.items():
            setattr(support_module, n, v)
    found.sort(key=lambda r: (r["precision"] < 0.95, -r["recall"], -r["precision"]))
    return found[:40]


CPU_GOAL_S = 0.5  # bench/text_fuzz.py's goal for one request's text processing


def worst_cpu(corpus: Corpus, chars: int = 2048) -> dict[str, Any]:
    """The CPU one reply's checking costs (claims included, the embedding model in this process), whole
    and streamed in 4-character pieces, on replies of ``chars`` (llm_max_tokens x 4) shaped to make it
    work: sentences that all need the model's comparison, one endless sentence, runs of negations;
    against ordinary supported prose of the same size (the baseline)."""
    keys = [("TICKETS", "4001"), ("TICKETS", "4003"), ("TICKETS", "4004"), ("KB", "203")]
    supported = "The upgrade is blocked because ADFS still signs assertions with SHA-1 [TICKETS #4001]. "
    shapes = {
        "supported prose (baseline)": (supported * (chars // len(supported) + 1))[:chars],
        "near-misses, each compared by meaning": "".join(
            f"The upgrade is blocked because ADFS signs assertions with SHA-1 zq{chr(97 + i % 26)}{chr(97 + i // 26)} "
            "[TICKETS #4001]. "
            for i in range(chars // 60)
        )[:chars],
        "one endless sentence": ("the heap was set too high and the wizard stops " * chars)[: chars - 20]
        + " [TICKETS #4004].",
        "negations": ("not " * chars)[: chars - 20] + " [TICKETS #4001].",
        "anchors and words": ("[TICKETS #4003] leaks sockets " * chars)[:chars],
    }
    records = {k: (corpus.facets[k], corpus.texts[k].split("\n", 1)[0]) for k in keys}
    out: dict[str, float] = {}
    for name, text in shapes.items():
        for way in ("whole", "streamed by 4"):
            evidence = evidence_from(
                [corpus.texts[k] for k in keys],
                records=records,
                vocab=corpus.vocab,
                cite=True,
                record_texts={k: corpus.texts[k] for k in keys},
                embed=lambda texts: corpus.rag.engine.embed_many(texts, "passage"),
            )  # uncached: what a request pays
            started = time.process_time()
            if way == "whole":
                check_text(text, evidence)
            else:
                list(SentenceChecker(evidence).feed([text[i : i + 4] for i in range(0, len(text), 4)]))
            out[f"{name}, {way}"] = round(time.process_time() - started, 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data-dir", default=str(ROOT / ".oracle-rag" / "bench-qa-open"))
    parser.add_argument("--sentences", type=Path, default=SENTENCES)
    parser.add_argument("--verbose", action="store_true", help="print every sentence judged wrongly")
    parser.add_argument("--tune", action="store_true", help="search the thresholds on the tuning sentences")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    items = load(args.sentences)
    corpus = Corpus(Path(args.data_dir))
    try:
        started = time.perf_counter()
        baseline = summary(measure(corpus, items, claims=False))
        rows = measure(corpus, items)
        seconds = time.perf_counter() - started
        result = summary(rows)
        best = tune(corpus, items) if args.tune else []
        worst_cpu(corpus, 500)  # warm: the model's session is loaded once per process
        cpu = worst_cpu(corpus)
    finally:
        corpus.rag.close()
    thresholds = {
        n: getattr(support_module, n)
        for n in ("MIN_COVERAGE", "SURE_COVERAGE", "MIN_SIMILARITY", "MIN_CLAIM")
    }
    print(
        f"{len(items)} labelled sentences ({sum(i.supported for i in items)} supported), "
        f"{sum(i.held_out for i in items)} held out; thresholds {thresholds}"
    )
    for label, r in (
        ("baseline: the checker without claims (numbers, anchors, facet values)", baseline),
        ("checker with claims", result),
    ):
        print(f"{label}:")
        for part in ("all", "tuning", "held_out"):
            s = r[part]
            print(
                f"    {part:9} precision of 'supported' {s['precision']:.3f}  recall {s['recall']:.3f}  "
                f"({s['kept']} kept of {s['sentences']}, {s['supported']} supported)"
            )
    print(
        "per kind (share judged right): "
        + "  ".join(f"{k} {v['right']:.2f} ({v['sentences']})" for k, v in result["per_kind"].items())
    )
    print(f"removed because: {result['removed_because']}")
    ratio = {p: round(result[p]["precision"] / baseline[p]["precision"], 2) for p in ("all", "held_out")}
    print(f"precision / baseline's: all {ratio['all']}x, held out {ratio['held_out']}x")
    met = all(result[p]["precision"] >= 0.95 and result[p]["recall"] >= 0.8 for p in ("all", "held_out"))
    print("goal (precision >= 0.95, recall >= 0.8, all and held out): " + ("met" if met else "NOT met"))
    base = max(v for k, v in cpu.items() if k.startswith("supported prose"))
    worst = max(cpu, key=lambda k: cpu[k])
    print(
        f"CPU of one 2,048-character reply's checking: worst {cpu[worst]:.3f} s ({worst}), "
        f"{cpu[worst] / base if base else float('inf'):.1f}x the baseline's {base:.3f} s; goal {CPU_GOAL_S} s"
    )
    if args.verbose:
        for r in rows:
            if r["kept"] != r["supported"]:
                print(
                    f"  {'FALSE KEPT' if r['kept'] else 'FALSE REMOVED'} ({r['kind']}, {r['reason'] or 'kept'}"
                    f"{', held out' if r['held_out'] else ''}): {r['sentence']}"
                )
    for b in best:
        print("tune: " + json.dumps(b))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "bench": "checker",
                "sentences_file": str(args.sentences.relative_to(ROOT)),
                "thresholds": thresholds,
                "python": platform.python_version(),
                "embedding_model": corpus.rag.settings.embedding_model,
                "seconds": round(seconds, 1),
                "goal_met": met,
                "baseline": baseline,
                "checker": result,
                "ratio_to_baseline": ratio,
                "tune": best,
                "cpu_s": cpu,
                "cpu_goal_s": CPU_GOAL_S,
                "sentences": rows,
            },
            indent=2,
            ensure_ascii=False,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
