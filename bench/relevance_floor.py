"""The relevance floor of ``oracle_rag/answering/structured/relevance.py``, measured on the help desk's open questions.

For each question of ``bench/data/helpdesk/questions.json``: the topic the product searches with (the
question understood), the first ``EVIDENCE_DEPTH`` records hybrid retrieval returns for it, and the best
share of the topic's words one of them holds (``relevance.coverage``). Printed per kind of question
(answered in the question's language, cross-language, nothing answers), then for floors from 0.2 to 0.8
the share of "nothing answers" questions the floor says so for and the share of answered ones it says so
for wrongly, on the questions used to choose (not held out) and on the held-out third. The baseline is
no floor (no question is said to have no answer: 0 caught, 0 wrong). Writes
``bench/results/relevance_floor.json``.

Where the words find nothing, the active embedding model may vouch for a first record written in
the other language (``Chat.other_language_similarity`` over the model's ``about_similarity``): the
bench prints that similarity for the questions the words call unanswered, the rates for similarity
floors around the model's, and the product's rule (the words, then the model). Run it on a data
directory switched to ``multilingual-e5-small`` (``oracle-rag model switch``) to measure e5's floor.

``--crossing`` judges with the lexicon's EN/ES word map (``relevance.coverage``), which the product does not
use yet: the cross-language questions' median share goes from 0.41 to 0.55 and the answered questions
said to have no answer from 0.09 to 0.06 (2 of the 6 cross-language ones), "nothing answers" caught
0.90 either way.

Run: ``.venv/bin/python bench/relevance_floor.py [--data-dir DIR] [--crossing]`` (shares qa_open.py's data
directory).
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import qa_open  # noqa: E402

from oracle_rag.answering.chat import Chat  # noqa: E402
from oracle_rag.answering.structured import relevance  # noqa: E402
from oracle_rag.callers.access import directory_for  # noqa: E402
from oracle_rag.search.retriever import Retriever  # noqa: E402

FLOORS = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
RESULTS = ROOT / "bench" / "results" / "relevance_floor.json"


def best_coverage(
    rag: Any, chat: Chat, caller: Any, question: str, crossing: bool = False
) -> tuple[float, bool, float | None]:
    """The best share of the topic's words one of the first records holds, whether the words' rule
    (``relevance.weak_evidence``: the share, both words of a two-word topic, and every proper name the
    question gives it) says none holds it, and
    the best similarity to the question of a first record written in the other language (what the model
    vouches with, ``Chat.other_language_similarity``; None when there is no such record)."""
    u, _ = chat.answers.understand(question, caller)  # type: ignore[union-attr]
    topic = u.topic or question
    hits = Retriever(rag.engine, rag.settings).search(topic, None, caller, "hybrid")
    stems = relevance.topic_stems(topic)
    texts = [h.content for h in hits[: relevance.EVIDENCE_DEPTH]]
    best = max((relevance.coverage(stems, t, crossing) for t in texts), default=0.0)
    similar = chat.other_language_similarity(question, hits, u.language, caller)
    weak = relevance.weak_evidence(topic, texts, crossing, named=relevance.names(topic, question))
    return best, weak, similar


def vouch_rates(rows: list[dict[str, Any]], floor: float) -> dict[str, float]:
    """With the model vouching over ``floor``: the share of "nothing answers" questions still said to
    have no answer, and of answered ones said so wrongly."""
    none = [r for r in rows if r["kind"] == "none"]
    answered = [r for r in rows if r["kind"] != "none"]

    def says_none(r: dict[str, Any]) -> bool:
        return r["weak"] and (r["other_similarity"] is None or r["other_similarity"] < floor)

    return {
        "caught": sum(says_none(r) for r in none) / max(len(none), 1),
        "wrong": sum(says_none(r) for r in answered) / max(len(answered), 1),
    }


def rates(rows: list[dict[str, Any]], floor: float) -> dict[str, float]:
    none = [r for r in rows if r["kind"] == "none"]
    answered = [r for r in rows if r["kind"] != "none"]
    return {
        "caught": sum(r["coverage"] < floor for r in none) / max(len(none), 1),
        "wrong": sum(r["coverage"] < floor for r in answered) / max(len(answered), 1),
        "wrong_same_language": sum(r["coverage"] < floor for r in answered if r["kind"] != "cross")
        / max(sum(r["kind"] != "cross" for r in answered), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data-dir", default=str(ROOT / ".oracle-rag" / "bench-qa-open"))
    parser.add_argument(
        "--crossing",
        action="store_true",
        help="a topic word is also held by its other-language word (the lexicon's EN/ES map)",
    )
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    questions = json.loads(qa_open.QUESTIONS.read_text(encoding="utf-8"))["questions"]
    rag = qa_open.prepare(Path(args.data_dir))
    try:
        chat = Chat(rag, None)
        with rag.engine.connect() as conn:
            caller = directory_for(rag.engine).load(conn, qa_open.ASKER)
        rows = []
        for q in questions:
            share, weak, similar = best_coverage(rag, chat, caller, q["question"], args.crossing)
            rows.append(
                {
                    "id": q["id"],
                    "kind": q["kind"],
                    "held_out": q["held_out"],
                    "coverage": round(share, 3),
                    "weak": weak,
                    "other_similarity": None if similar is None else round(similar, 3),
                }
            )
        model_floor = chat.about_similarity()
        with rag.engine.connect() as conn:
            model = rag.engine.active_generation(conn).model_name
    finally:
        rag.close()
    groups = {
        "answered, same language": [r for r in rows if r["kind"] not in ("none", "cross")],
        "answered, other language": [r for r in rows if r["kind"] == "cross"],
        "nothing answers": [r for r in rows if r["kind"] == "none"],
    }
    for name, group in groups.items():
        values = sorted(r["coverage"] for r in group)
        print(
            f"{name:26} n={len(values):2}  min {values[0]:.2f}  median {statistics.median(values):.2f}  "
            f"max {values[-1]:.2f}"
        )
    tune = [r for r in rows if not r["held_out"]]
    held = [r for r in rows if r["held_out"]]
    table = []
    print("\nfloor   chosen-on: caught wrong (same language)   held out: caught wrong (same language)")
    for floor in FLOORS:
        t, h = rates(tune, floor), rates(held, floor)
        mark = "  <- relevance.ABOUT" if floor == relevance.ABOUT else ""
        print(
            f"{floor:.1f}     {t['caught']:.2f} {t['wrong']:.2f} ({t['wrong_same_language']:.2f})"
            f"                  {h['caught']:.2f} {h['wrong']:.2f} ({h['wrong_same_language']:.2f}){mark}"
        )
        table.append({"floor": floor, "tuning": t, "held_out": h})
    unanswerable = [r for r in rows if r["kind"] == "none"]
    answered = [r for r in rows if r["kind"] != "none"]
    words_only = {
        "caught": sum(r["weak"] for r in unanswerable) / max(len(unanswerable), 1),
        "wrong": sum(r["weak"] for r in answered) / max(len(answered), 1),
    }
    print(
        f"the words' rule (floor {relevance.ABOUT}, both words of a two-word topic, its names): caught "
        f"{words_only['caught']:.2f}, wrong {words_only['wrong']:.2f}"
    )
    # the model vouches for a record in the other language: only where the words found none
    weak = [r for r in rows if r["weak"]]
    print(
        f"\n{model}: similarity of the closest first record in the other language, where the words found none"
    )
    for name, group in (
        ("answered, other language", [r for r in weak if r["kind"] == "cross"]),
        ("answered, same language", [r for r in weak if r["kind"] not in ("none", "cross")]),
        ("nothing answers", [r for r in weak if r["kind"] == "none"]),
    ):
        values = sorted(r["other_similarity"] for r in group if r["other_similarity"] is not None)
        print(f"{name:26} n={len(group):2} with such a record {len(values):2}: {values}")
    vouching = []
    if model_floor is not None:
        print("\nsimilarity floor   chosen-on: caught wrong   held out: caught wrong")
        for floor in sorted({round(model_floor + d / 100, 2) for d in range(-10, 11, 2)}):
            t, h = vouch_rates(tune, floor), vouch_rates(held, floor)
            mark = f"  <- {model}'s about_similarity" if floor == model_floor else ""
            print(
                f"{floor:.2f}               {t['caught']:.2f} {t['wrong']:.2f}"
                f"          {h['caught']:.2f} {h['wrong']:.2f}{mark}"
            )
            vouching.append({"floor": floor, "tuning": t, "held_out": h})
    product = {
        part: vouch_rates(subset, model_floor) if model_floor is not None else words_only
        for part, subset in (("all", rows), ("tuning", tune), ("held_out", held))
    }
    print(
        f"the product's rule (the words, and {model} vouching over {model_floor}): caught "
        f"{product['all']['caught']:.2f}, wrong {product['all']['wrong']:.2f}"
    )
    print("baseline (no floor): caught 0.00, wrong 0.00")
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    summary = {
        "bench": "relevance_floor",
        "crossing": args.crossing,
        "about": relevance.ABOUT,
        "depth": relevance.EVIDENCE_DEPTH,
        "floors": table,
        "model": model,
        "about_similarity": model_floor,
        "similarity_floors": vouching,
        "words_only": words_only,
        "product": product,
        "questions": rows,
    }
    RESULTS.write_text(json.dumps(summary, indent=1), encoding="utf-8")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
