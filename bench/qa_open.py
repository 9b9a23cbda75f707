"""Open questions over a help desk: the record that answers, the facts of the answer, "nothing says so".

The corpus is ``bench/data/helpdesk`` (bench/helpdesk.py): 106 hand-written tickets with comment
threads (a third in Spanish) and 30 knowledge-base articles, declared as SQL sources in
``oracle-rag.toml`` there, on a database migrated without the reference application's tables.
The questions (``bench/data/helpdesk/questions.json``) ask why, how, what was decided, who said,
what the workaround is, what blocks something (status words inside the text, where the answering
ticket's own state differs), across languages, and about things nothing in the data says.

Each question names its answering records and the facts a correct answer contains (short strings,
compared accent- and case-folded). Scores per question:

* ``record@3``: an answering record is among the answer's first 3 citations;
* ``facts``: the share of the facts found in the answer's text (an answer that says the data does
  not say scores 0 here);
* ``no_answer``: for the questions nothing answers, the answer says so (one of ``NO_ANSWER``);
  for the others, ``false_no_answer`` counts answers that say so wrongly.

Runs, in one process on one index: the retrieval legs alone (semantic, keyword, hybrid: an
answering record in the top 3, and MRR@10); the baseline, the answer without a model as it was
before sentence selection (the top 3 records' first lines and the text around the question's words);
the extractive answer on retrieval alone (``Chat(structured=False)``: no query understanding); the
product's answer without a model (``Chat``, the path ``/api/chat`` takes) and, with ``--llm-url``,
with a model (also: how often the model's prose was kept, and its shown sentences that name a record
that does not answer, counted in what the model wrote: not in the records quoted under it, nor in
the extractive answer that stands in when nothing it wrote was kept).
A third of the questions are held out (``held_out``): never looked at while tuning the product;
every score is printed for all questions and for the held-out ones.

Run: ``.venv/bin/python bench/qa_open.py [--data-dir DIR] [--llm-url URL] [--only IDS|KINDS|held_out]
[--verbose]``. The first run indexes the corpus (about 10 s); later runs reuse the data directory.
Writes ``bench/results/qa_open.json`` (``--out``). A small local model takes tens of seconds an
answer: ask in chunks (``--only open-01,open-02 --out part1.json``, ...) and ``--merge part*.json``
them into one result (``bench/results/qa_open_llm.json`` holds such a run).
"""

from __future__ import annotations

import argparse
import json
import platform
import re
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ROOT / "bench" / "data" / "helpdesk" / "questions.json"
RESULTS = ROOT / "bench" / "results" / "qa_open.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import helpdesk  # noqa: E402
from qa import add_model_arguments, fold, model_settings, percentile  # noqa: E402

from oracle_rag.answering.chat import Chat, LLMClient  # noqa: E402
from oracle_rag.answering.chat.answer import NOTHING_FOUND, QUOTED_HEADERS, UNCHECKED  # noqa: E402
from oracle_rag.answering.chat.citations import snippet  # noqa: E402
from oracle_rag.callers.access import directory_for  # noqa: E402
from oracle_rag.config import load_settings  # noqa: E402
from oracle_rag.errors import LLMError  # noqa: E402
from oracle_rag.search.retriever import Retriever  # noqa: E402
from oracle_rag.system import RagSystem  # noqa: E402

ASKER = 2  # Ana Pérez, a lead: sees every ticket (the access rules are not what this bench measures)
KINDS = ("why", "how", "decision", "who", "workaround", "status", "cross", "none")
# How an answer says that nothing in the data answers the question (folded; EN and ES).
NO_ANSWER = tuple(
    fold(s)
    for s in (
        "nothing I can see says",
        "nothing in the records",
        "no record says",
        "none of the records",
        "nada de lo que puedo ver",
        "ningún registro dice",
        "ninguno de los registros",
        NOTHING_FOUND,
    )
)
_ANCHOR = re.compile(r"\[([A-Za-z][A-Za-z0-9_.\-]*)\s*#\s*([^\s,;\[\]]+)\]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")


def prepare(data_dir: Path) -> RagSystem:
    rag = RagSystem(load_settings(env={}, config_file=helpdesk.CONFIG, data_dir=str(data_dir)))
    rag.migrate()
    with rag.engine.begin() as conn:
        if helpdesk.create(conn):
            print("created the help desk's tables; indexing...", flush=True)
    for result in rag.sql_sources().sync():
        print(result.summary(), flush=True)
    return rag


def record_texts() -> dict[str, str]:
    """Each record's text as written, by anchor ("TICKETS #4001"): what a fact must be found in."""
    out = {}
    for t in helpdesk.tickets():
        out[f"TICKETS #{t.number}"] = "\n".join(
            [t.fields["subject"], t.text, *(f"{a}: {body}" for a, _, body in t.comments)]
        )
    for a in helpdesk.articles():
        out[f"KB #{a.number}"] = a.fields["title"] + "\n" + a.text
    return out


def check_questions(questions: list[dict[str, Any]]) -> None:
    """Every fact is in one of its answering records, every answering record exists: a set that could
    not be answered from the data would measure nothing."""
    texts = record_texts()
    for q in questions:
        for anchor in q["answers"]:
            if anchor not in texts:
                raise SystemExit(f"{q['id']}: no record {anchor}")
        for fact in q["facts"]:
            if not any(fold(fact) in fold(texts[a]) for a in q["answers"]):
                raise SystemExit(f"{q['id']}: fact {fact!r} is in none of {q['answers']}")
        if q["kind"] == "none" and (q["answers"] or q["facts"]):
            raise SystemExit(f"{q['id']}: a question nothing answers has no answers or facts")


def says_no_answer(text: str) -> bool:
    low = fold(text)
    return any(marker in low for marker in NO_ANSWER)


def anchors_of(answer: dict[str, Any]) -> list[str]:
    return [c["anchor"].strip("[]") for c in answer["citations"]]


def model_prose(answer: dict[str, Any]) -> str:
    """The part of an answer the model wrote: what precedes the checker's fallback line (after it, the
    extractive answer lists records, it does not claim) or the cited records' own sentences (quoted,
    not claimed), and nothing of an answer no model wrote ("nothing I can see says ..." over the
    closest records: listed, not claimed)."""
    text = answer["answer"]
    if UNCHECKED in text:
        return text.split(UNCHECKED, 1)[0]
    if answer["answerer"] != "llm":
        return ""
    for header in QUOTED_HEADERS:
        text = text.split(header, 1)[0]
    return text


def other_record_sentences(text: str, answers: list[str]) -> int:
    """Sentences of ``text`` (:func:`model_prose`) that name a record which does not answer the question."""
    wanted = {a.upper() for a in answers}
    count = 0
    for sentence in _SENTENCE.split(text):
        named = {f"{t.upper()} #{i}" for t, i in _ANCHOR.findall(sentence)}
        count += bool(named - wanted)
    return count


def score(q: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    text = answer["answer"]
    no = says_no_answer(text)
    if q["kind"] == "none":
        return {"no_answer": 1.0 if no else 0.0}
    found = [f for f in q["facts"] if fold(f) in fold(text)] if not no else []
    return {
        "record@3": 1.0 if set(anchors_of(answer)[:3]) & set(q["answers"]) else 0.0,
        "facts": len(found) / len(q["facts"]),
        "false_no_answer": 1.0 if no else 0.0,
        "missing": [f for f in q["facts"] if f not in found],
    }


METRICS = ("record@3", "facts", "no_answer", "false_no_answer")


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean of each metric over all questions and over the held-out ones, and per kind (all)."""

    def means(subset: list[dict[str, Any]]) -> dict[str, float]:
        out = {}
        for m in METRICS:
            values = [r[m] for r in subset if m in r]
            if values:
                out[m] = round(sum(values) / len(values), 4)
        return out

    by_kind: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_kind[r["kind"]].append(r)
    return {
        "all": means(rows),
        "held_out": means([r for r in rows if r["held_out"]]),
        "per_kind": {k: means(by_kind[k]) for k in KINDS if by_kind[k]},
    }


def run_chat(
    rag: RagSystem,
    chat: Chat | FirstLines,
    questions: list[dict[str, Any]],
    label: str,
    mode: str,
    callers: dict[int, Any],
    *,
    model: bool = False,
) -> dict[str, Any]:
    rows = []
    started = time.perf_counter()
    for q in questions:
        t0 = time.perf_counter()
        try:
            answer = chat.answer(q["question"], callers[q.get("as", ASKER)], store=False, mode=mode).to_dict()
        except LLMError as exc:  # a model that does not answer in time scores nothing; the run goes on
            if not model:
                raise
            answer = {
                "answer": "",
                "citations": [],
                "answerer": "error",
                "route": "",
                "checked": None,
                "error": exc.message,
            }
        seconds = time.perf_counter() - t0
        row = {
            "id": q["id"],
            "kind": q["kind"],
            "lang": q["lang"],
            "held_out": q["held_out"],
            "question": q["question"],
            **score(q, answer),
            "seconds": round(seconds, 3),
            "answerer": answer["answerer"],
            "route": answer["route"],
            "cited": anchors_of(answer)[:5],
            "answer": answer["answer"],
        }
        if model:
            row["other_record_sentences"] = other_record_sentences(model_prose(answer), q["answers"])
            row["model_kept"] = UNCHECKED not in answer["answer"] and answer["answerer"] == "llm"
            row["checked"] = answer["checked"]
            print(f"  {q['id']} {row.get('record@3', row.get('no_answer'))} {seconds:.0f} s", flush=True)
        rows.append(row)
    out: dict[str, Any] = {
        "label": label,
        **summarise(rows),
        "latency_s": {
            "p50": percentile([r["seconds"] for r in rows], 0.5),
            "p95": percentile([r["seconds"] for r in rows], 0.95),
        },
        "seconds": round(time.perf_counter() - started, 1),
        "questions": rows,
    }
    if model:
        out["other_record_sentences"] = sum(r["other_record_sentences"] for r in rows)
        out["model_answers_kept"] = sum(r["model_kept"] for r in rows)
    return out


class FirstLines:
    """The baseline: the answer without a model as it was before sentence selection, the top 3 records
    of the same retrieval with their first line and the 200 characters around the question's words."""

    def __init__(self, rag: RagSystem) -> None:
        self.retriever = Retriever(rag.engine, rag.settings)

    def answer(self, question: str, caller: Any, *, store: bool, mode: str) -> Any:
        chunks = self.retriever.search(question, None, caller, mode)[:3]
        lines = ["(first lines of the most relevant records)", ""] if chunks else [NOTHING_FOUND]
        for i, c in enumerate(chunks, 1):
            first, _, rest = c.content.strip().partition("\n")
            lines += [f"{i}. {c.anchor} {first}", f"   {snippet(rest, 200, query=question)}"]
        citations = [{"anchor": c.anchor} for c in chunks]
        return _Plain(
            {
                "answer": "\n".join(lines),
                "citations": citations,
                "answerer": "baseline",
                "route": "retrieval",
                "checked": None,
            }
        )


class _Plain:
    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        return self.data


def run_legs(
    rag: RagSystem, questions: list[dict[str, Any]], callers: dict[int, Any]
) -> list[dict[str, Any]]:
    """The retrieval legs alone on the raw question: an answering record in the top 3, MRR@10."""
    retriever = Retriever(rag.engine, rag.settings)
    out = []
    for mode in ("semantic", "keyword", "hybrid"):
        rows = []
        for q in questions:
            if not q["answers"]:
                continue
            hits = [
                c.anchor.strip("[]")
                for c in retriever.search(q["question"], 10, callers[q.get("as", ASKER)], mode)
            ]
            ranks = [i for i, a in enumerate(hits, 1) if a in q["answers"]]
            rows.append(
                {
                    "id": q["id"],
                    "kind": q["kind"],
                    "held_out": q["held_out"],
                    "record@3": 1.0 if ranks and ranks[0] <= 3 else 0.0,
                    "mrr@10": 1.0 / ranks[0] if ranks else 0.0,
                }
            )
        # ``--only`` on questions none of which is held out (or that nothing answers) scores nothing there
        summary = {
            part: {m: round(statistics.fmean(r[m] for r in subset), 4) for m in ("record@3", "mrr@10")}
            if subset
            else {}
            for part, subset in (("all", rows), ("held_out", [r for r in rows if r["held_out"]]))
        }
        out.append({"label": f"retrieval only, {mode}", **summary})
    return out


def line(result: dict[str, Any]) -> str:
    def part(scores: dict[str, float]) -> str:
        return "  ".join(f"{m} {scores[m]:.2f}" for m in (*METRICS, "mrr@10") if m in scores)

    return (
        f"{result['label']}:\n    all       {part(result['all'])}\n    held out  {part(result['held_out'])}"
    )


def ask(args: argparse.Namespace, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every run on ``questions``: the retrieval legs, the baseline, the answers without a model and,
    with ``--llm-url``, with one."""
    rag = prepare(Path(args.data_dir))
    runs: list[dict[str, Any]] = []
    try:
        with rag.engine.connect() as conn:
            directory = directory_for(rag.engine)
            callers = {who: directory.load(conn, who) for who in {q.get("as", ASKER) for q in questions}}
        runs += run_legs(rag, questions, callers)
        runs.append(
            run_chat(
                rag,
                FirstLines(rag),
                questions,
                "baseline: the top 3 records' first lines, no model",
                args.mode,
                callers,
            )
        )
        runs.append(
            run_chat(
                rag,
                Chat(rag, None, structured=False),
                questions,
                "extractive answer on retrieval alone (no query understanding), no model",
                args.mode,
                callers,
            )
        )
        runs.append(run_chat(rag, Chat(rag, None), questions, "product, no model", args.mode, callers))
        if args.llm_url:
            settings = model_settings(rag.settings, args)
            runs.append(
                run_chat(
                    rag,
                    Chat(rag, LLMClient(settings), settings=settings),
                    questions,
                    f"product, model at {args.llm_url}",
                    args.mode,
                    callers,
                    model=True,
                )
            )
    finally:
        rag.close()
    return runs


def merge(paths: list[Path], questions: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], int, int]:
    """The runs of one bench asked in chunks (``--only``, so that a long run with a slow model is not
    lost), as one: each answering run's questions together, scored again (a model's shown sentences
    naming a non-answering record counted again from its answer, as :func:`model_prose` reads it). The
    retrieval legs keep no question rows and are left out. Also the number of questions and of held-out
    ones."""
    answering = {q["id"]: q["answers"] for q in questions}
    rows: dict[str, list[dict[str, Any]]] = {}
    for path in paths:
        for run in json.loads(path.read_text(encoding="utf-8"))["runs"]:
            for row in run.get("questions", []):
                if "other_record_sentences" in row:
                    row["other_record_sentences"] = other_record_sentences(
                        model_prose(row), answering[row["id"]]
                    )
                rows.setdefault(run["label"], []).append(row)
    runs = []
    for label, found in rows.items():
        run: dict[str, Any] = {
            "label": label,
            **summarise(found),
            "latency_s": {
                "p50": percentile([r["seconds"] for r in found], 0.5),
                "p95": percentile([r["seconds"] for r in found], 0.95),
            },
            "seconds": round(sum(r["seconds"] for r in found), 1),
            "questions": found,
        }
        if found and "other_record_sentences" in found[0]:
            run["other_record_sentences"] = sum(r["other_record_sentences"] for r in found)
            run["model_answers_kept"] = sum(r["model_kept"] for r in found)
        runs.append(run)
    first = next(iter(rows.values()), [])
    return runs, len(first), sum(r["held_out"] for r in first)


def report(args: argparse.Namespace, runs: list[dict[str, Any]]) -> bool:
    """Print every run, its ratios to the baseline and the goals; whether the goal without a model is met."""
    print()
    for r in runs:
        print(line(r))
        if "latency_s" in r:
            print(
                f"    latency p50 {r['latency_s']['p50']} s, p95 {r['latency_s']['p95']} s"
                + (
                    f"; the model's answer kept in {r['model_answers_kept']} of {len(r['questions'])}, "
                    f"its shown sentences naming a non-answering record: {r['other_record_sentences']}"
                    if "other_record_sentences" in r
                    else ""
                )
            )
    base = next(r for r in runs if r["label"].startswith("baseline"))
    for r in runs:
        if "questions" in r and r is not base:
            ratios = {
                m: (round(r["all"][m] / base["all"][m], 2) if base["all"].get(m) else None)
                for m in ("record@3", "facts", "no_answer")
                if m in r["all"]
            }
            r["ratio_to_baseline"] = ratios
            print(
                f"{r['label']} / baseline: "
                + "  ".join(f"{m} {'n/a' if v is None else f'{v:.2f}x'}" for m, v in ratios.items())
            )
            print(
                "    per kind (record@3 / facts, or no_answer): "
                + "  ".join(
                    f"{k} " + "/".join(f"{s[m]:.2f}" for m in ("record@3", "facts", "no_answer") if m in s)
                    for k, s in r["per_kind"].items()
                )
            )
    if args.verbose:
        for r in runs:
            for row in r.get("questions", []):
                if (
                    r is base
                    or row.get("record@3", 1) == 1
                    and row.get("facts", 1) == 1
                    and row.get("no_answer", 1) == 1
                ):
                    continue
                if args.tune and row["held_out"]:
                    continue
                print(
                    f"\n[{r['label']}] {row['id']} ({row['kind']}) {row['question']}\n"
                    f"  record@3 {row.get('record@3')} facts {row.get('facts')} missing {row.get('missing')} "
                    f"no_answer {row.get('no_answer')} cited {row['cited'][:3]}\n  "
                    + row["answer"][:600].replace("\n", "\n  ")
                )
    goals = next(r for r in runs if r["label"] == "product, no model")["all"]
    met = (
        goals.get("record@3", 0) >= 0.9 and goals.get("facts", 0) >= 0.8 and goals.get("no_answer", 0) >= 0.75
    )
    print(
        "goal without a model (record@3 >= 0.9, facts >= 0.8, no-answer >= 0.75): "
        + ("met" if met else "NOT met")
    )
    for r in runs:
        if "other_record_sentences" in r:
            facts = r["all"].get("facts", 0)
            print(
                "goal with the model (facts >= 0.85, 0 shown sentences naming a non-answering record): "
                + ("met" if facts >= 0.85 and r["other_record_sentences"] == 0 else "NOT met")
                + f" (facts {facts:.2f}, {r['other_record_sentences']} sentences)"
            )
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data-dir", default=str(ROOT / ".oracle-rag" / "bench-qa-open"))
    parser.add_argument("--questions", default=str(QUESTIONS))
    add_model_arguments(parser)
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated question ids or kinds to ask (held_out: the held-out ones)",
    )
    parser.add_argument(
        "--merge",
        nargs="+",
        type=Path,
        default=[],
        help="merge the JSON results of runs in chunks instead of asking",
    )
    parser.add_argument("--verbose", action="store_true", help="print every answer that missed")
    parser.add_argument(
        "--tune",
        action="store_true",
        help="with --verbose: print only the misses of questions that are not held out",
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON results go")
    args = parser.parse_args()
    questions = json.loads(Path(args.questions).read_text(encoding="utf-8"))["questions"]
    check_questions(questions)
    if args.only:
        wanted = set(args.only.split(","))
        questions = [
            q
            for q in questions
            if q["id"] in wanted or q["kind"] in wanted or (q["held_out"] and "held_out" in wanted)
        ]
    if args.merge:
        runs, asked, held_out = merge(args.merge, questions)
    else:
        runs = ask(args, questions)
        asked, held_out = len(questions), sum(q["held_out"] for q in questions)
    met = report(args, runs)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "bench": "qa_open",
                "corpus": helpdesk.shape(),
                "questions_file": args.questions,
                "questions": asked,
                "held_out": held_out,
                "merged_from": [str(p) for p in args.merge],
                "mode": args.mode,
                "python": platform.python_version(),
                "goal_met": met,
                "runs": runs,
            },
            indent=2,
            ensure_ascii=False,
            default=str,
        )
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
