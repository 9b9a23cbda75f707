"""Text processing under fuzzing: the worst CPU one question or one model reply costs, up to the size limits.

Every request carries text someone else wrote: the question (read by the
parser, the router and the prompt builder) and the model's reply (redacted
for record mentions, then checked sentence by sentence, whole or streamed).
This bench feeds both random and adversarial text of every shape that makes
a backtracking pattern or a quadratic loop work hard (long runs of spaces,
digits, separators, brackets; lists of ids; a record word followed by
thousands of spaces; one sentence that never ends; a reply streamed in
one-character pieces) at sizes up to the limits:

* questions: ``max_question_chars`` (default 4,000; ``--question-chars`` up to
  the setting's maximum, 16,000);
* replies: ``llm_max_tokens`` x 4 characters (512 tokens by default, 2,048
  characters; ``--reply-chars`` for the setting's maximum, 16,384 tokens),
  whole and streamed in pieces of 4 characters (one per token), and up to
  4,096 characters in pieces of one.

It reports the worst CPU time (``time.process_time``) of one request's text
processing, per shape and overall, against the goal (0.5 s), and the ratio
to a baseline measured in the same run: ordinary prose of the same size
through the same code.

Run: ``.venv/bin/python bench/text_fuzz.py [--question-chars 4000] [--reply-chars 2048] [--random 20]``.
``--isolate SECONDS`` runs each case in a child process killed after that
long (to measure a version whose worst case does not end). Writes
``bench/results/text_fuzz.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import multiprocessing
import platform
import random
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "text_fuzz.json"
sys.path.insert(0, str(ROOT))

from oracle_rag.answering.chat.checking import SentenceChecker, evidence_from  # noqa: E402
from oracle_rag.answering.chat.mentions import RecordWords, redact_stream  # noqa: E402
from oracle_rag.answering.chat.prompt import neutralise  # noqa: E402
from oracle_rag.answering.chat.router import looks_aggregate  # noqa: E402
from oracle_rag.answering.structured.understanding import QueryParser  # noqa: E402
from oracle_rag.answering.structured.vocabulary import build_vocabulary  # noqa: E402
from oracle_rag.config import Settings  # noqa: E402
from oracle_rag.errors import InputError  # noqa: E402
from oracle_rag.search.retriever import clean_query  # noqa: E402
from oracle_rag.sources.meanings import Declaration  # noqa: E402
from oracle_rag.sources.reference import TaskSource  # noqa: E402

GOAL_S = 0.5
TODAY = dt.date(2026, 3, 11)
VOCAB = build_vocabulary(
    [Declaration("TASK", tuple(TaskSource.facets), TaskSource.meanings)],
    {"status": {"TODO", "IN_PROGRESS", "BLOCKED", "DONE"}, "priority": {"LOW", "HIGH", "CRITICAL"}},
    {"assignee_id": {9: "Ana Ruiz", 10: "Bob Lee", 11: "Carmen Díaz"}},
)
PARSER = QueryParser(VOCAB)
WORDS = RecordWords.of(VOCAB.type_words, ["TASK", *VOCAB.types])
RECORDS = {
    ("TASK", "23"): ({"status": "TODO", "priority": "HIGH", "assignee_id": 9}, "Fix login timeout"),
    ("TASK", "41"): ({"status": "BLOCKED", "priority": "LOW", "assignee_id": 10}, "Invoice export"),
}
EVIDENCE = evidence_from(
    ["35 tasks match status: BLOCKED\n1. [TASK #23] Fix login timeout — TODO · HIGH · due 2026-03-14"],
    counts=[35],
    records=RECORDS,
    vocab=VOCAB,
    cite=True,
)
VISIBLE = {("TASK", "23"), ("TASK", "41")}

PROSE = (
    "the login service times out when the invoice export runs at night so the team moved the job "
    "and asked Ana Ruiz to review the retry policy before the next release of the portal "
)
WORDS_POOL = [
    "task",
    "tasks",
    "ticket",
    "#",
    "no.",
    "number",
    "id",
    "12",
    "0007",
    "2026-03-14",
    "blocked",
    "done",
    "high",
    "critical",
    "Ana",
    "Ruiz",
    "between",
    "5k",
    "and",
    "over",
    "1,000",
    "[",
    "]",
    "(",
    ")",
    "/chunk/task/",
    "TASK #",
    "<chunk>",
    "```",
    "{",
    "}",
    ".",
    "?",
    "!",
    ",",
    ";",
    ":",
    "-",
    "—",
    " ",
    "  ",
    "\n",
    "\t",
    "ＴＡＳＫ",
    "\u200b",
    "é",
    "ñ",
    "tareas",
    "cuántas",
    "veinte",
    "no",
    "sin",
    "entre",
    "y",
    "how many",
    "per",
    "status",
    "priority",
    "due",
    "this week",
    "Status: ",
    "|",
    "*",
    "_",
    "~",
    "`",
    "x" * 12,
]


def run(length: int, unit: str, prefix: str = "", suffix: str = "") -> str:
    body = max(0, length - len(prefix) - len(suffix))
    return prefix + (unit * (body // len(unit) + 1))[:body] + suffix


def adversarial(length: int) -> dict[str, str]:
    """Inputs of ``length`` characters shaped to hurt: runs, near-misses, lists, endless sentences."""
    ids = ", ".join(str(12 + 3 * i) for i in range(length // 4))
    return {
        "prose (baseline)": run(length, PROSE),
        "spaces after a record word": run(length, " ", "task", "#5"),
        "spaces after a record word, no id": run(length, " ", "task", "x"),
        "a list of ids": run(length, ids, "Tasks ", " are blocked."),
        "a list of #ids": run(length, ", #7", "TASKS #21"),
        "ids without a record word": run(length, "12, "),
        "digits": run(length, "1"),
        "digits and spaces": run(length, "1 "),
        "separators after a record word": run(length, "no", "task ", "x"),
        "hashes": run(length, "#"),
        "open brackets": run(length, "["),
        "an open anchor of spaces": run(length, " ", "[TASK #"),
        "anchors": run(length, "[TASK #23] "),
        "anchor-like words": run(length, "TASK #x "),
        "record words": run(length, "task "),
        "record words and ids": run(length, "task 1 "),
        "braces": run(length, "{"),
        "fences": run(length, "```{"),
        "spaces then a word": run(length, " ", "", "x"),
        "newlines": run(length, "\n"),
        "dots": run(length, "a."),
        "sentences": run(length, "It is. "),
        "between and spaces": run(length, " ", "between 5", "x"),
        "delimiter and spaces": run(length, " ", "<", "x"),
        "full-width record words": run(length, "ＴＡＳＫ ＃６１ "),
        "zero-width characters": run(length, "t\u200ba\u200bs\u200bk\u200b "),
        "one long word": run(length, "qwertyuiopasdfghjklzxcvbnm"),
        "unknown words": run(length, "qwertyz "),
        "numbers with commas": run(length, "1,000,"),
        "dates": run(length, "2026-03-14 "),
        "number words": run(length, "veinte tareas "),
        "links": run(length, "/chunk/task/7 "),
    }


def fuzzed(length: int, rng: random.Random) -> str:
    out: list[str] = []
    size = 0
    while size < length:
        token = rng.choice(WORDS_POOL)
        out.append(token)
        size += len(token)
    return "".join(out)[:length]


# -- what one request does with its text ------------------------------------------------
def question_cost(question: str, max_chars: int) -> None:
    """The question's text processing: the size check, the parser, the router's words, the prompt's escaping."""
    try:
        text = clean_query(question, max_chars)
    except InputError:  # refused (blank): that is the whole cost
        return
    PARSER.parse(text, 9, TODAY)
    looks_aggregate(text)
    neutralise(text)


def reply_cost(reply: str, piece: int) -> None:
    """The reply's: mention redaction and the sentence checker, whole (``piece`` 0) or streamed in pieces."""
    pieces: Iterator[str] = (
        iter([reply]) if piece == 0 else (reply[i : i + piece] for i in range(0, len(reply), piece))
    )
    checker = SentenceChecker(EVIDENCE)
    for _ in checker.feed(redact_stream(pieces, lambda keys: keys & VISIBLE, WORDS)):
        pass


def cpu(call: Callable[[], None]) -> float:
    started = time.process_time()
    call()
    return time.process_time() - started


def _child(call: Callable[[], None], out: Any) -> None:
    out.put(cpu(call))


def measured(call: Callable[[], None], isolate: float | None) -> float | None:
    """CPU seconds of ``call``; with ``isolate``, in a child process stopped after that long (None)."""
    if isolate is None:
        return cpu(call)
    queue: Any = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=_child, args=(call, queue))
    child.start()
    child.join(isolate)
    if child.is_alive():
        child.kill()
        child.join()
        return None
    return float(queue.get())


def main() -> None:
    settings = Settings()
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--question-chars",
        type=int,
        default=settings.max_question_chars,
        help="the largest question (max_question_chars; the setting allows 16,000)",
    )
    parser.add_argument(
        "--reply-chars",
        type=int,
        default=settings.llm_max_tokens * 4,
        help="the largest reply (llm_max_tokens x 4; 65,536 at the setting's maximum)",
    )
    parser.add_argument("--random", type=int, default=20, help="random texts per size")
    parser.add_argument(
        "--isolate",
        type=float,
        default=None,
        metavar="SECONDS",
        help="run each case in a child process stopped after SECONDS (reported as over)",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS, help="where the JSON results go")
    args = parser.parse_args()
    rng = random.Random(args.seed)

    cases: list[dict[str, Any]] = []
    sizes = {
        "question": sorted({min(args.question_chars, n) for n in (500, args.question_chars)}),
        "reply": sorted({min(args.reply_chars, n) for n in (500, args.reply_chars)}),
    }
    for kind, lengths in sizes.items():
        for length in lengths:
            texts = adversarial(length)
            texts.update({f"random {i}": fuzzed(length, rng) for i in range(args.random)})
            ways: list[tuple[str, Callable[[str], None]]]
            if kind == "question":
                ways = [("", lambda t: question_cost(t, args.question_chars))]
            else:
                ways = [("whole", lambda t: reply_cost(t, 0)), ("streamed by 4", lambda t: reply_cost(t, 4))]
                if length <= 4096:  # one piece per character: more pieces than a model sends tokens
                    ways.append(("streamed by 1", lambda t: reply_cost(t, 1)))
            for shape, text in texts.items():
                for way, call in ways:
                    seconds = measured(lambda c=call, t=text: c(t), args.isolate)  # type: ignore[misc]
                    cases.append(
                        {"kind": kind, "chars": length, "shape": shape, "way": way, "cpu_s": seconds}
                    )
                    if seconds is None or seconds > GOAL_S:
                        shown = "over" if seconds is None else f"{seconds:.3f} s"
                        print(f"  {kind} {length:>7} chars {shape!r} {way}: {shown}", flush=True)

    def worst(kind: str) -> dict[str, Any]:
        own = [c for c in cases if c["kind"] == kind]
        return max(own, key=lambda c: float("inf") if c["cpu_s"] is None else c["cpu_s"])

    summary: dict[str, Any] = {}
    print(f"{'':11}{'chars':>8} {'worst CPU':>11} {'prose':>9} {'ratio':>7}  worst shape")
    for kind in sizes:
        top = worst(kind)
        base = max(
            c["cpu_s"]
            for c in cases
            if c["kind"] == kind
            and c["chars"] == top["chars"]
            and c["shape"] == "prose (baseline)"
            and c["cpu_s"] is not None
        )
        over = top["cpu_s"] is None
        ratio = None if over else top["cpu_s"] / max(base, 1e-9)
        shown = f">{args.isolate:.0f} s" if over else f"{top['cpu_s']:.3f} s"
        print(
            f"{kind:11}{top['chars']:>8} {shown:>11} {base:>8.3f}s {'-' if ratio is None else f'{ratio:.1f}x':>7}  "
            f"{top['shape']} {top['way']}".rstrip()
        )
        summary[kind] = {"worst": top, "prose_baseline_s": base, "ratio": ratio}
    worst_all = max(
        (s["worst"] for s in summary.values()),
        key=lambda c: float("inf") if c["cpu_s"] is None else c["cpu_s"],
    )
    met = worst_all["cpu_s"] is not None and worst_all["cpu_s"] <= GOAL_S
    cost = "over the isolation limit" if worst_all["cpu_s"] is None else f"{worst_all['cpu_s']:.3f} s"
    print(
        f"worst request: {worst_all['kind']} {worst_all['chars']} chars, {worst_all['shape']} {worst_all['way']}: "
        f"{cost} CPU (goal {GOAL_S} s: {'met' if met else 'NOT met'})"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "bench": "text_fuzz",
                "question_chars": args.question_chars,
                "reply_chars": args.reply_chars,
                "random": args.random,
                "seed": args.seed,
                "isolate_s": args.isolate,
                "goal_s": GOAL_S,
                "goal_met": met,
                "summary": summary,
                "cases": cases,
                "python": platform.python_version(),
                "machine": platform.machine(),
            },
            indent=1,
            ensure_ascii=False,
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
