"""Question answering over the demo data: lookups, filters, counts and topics, scored against SQL truth.

The question set (``bench/data/qa/questions.json`` or ``--questions FILE``)
names, for each question, who asks it and a SQL statement over the
reference tables that computes the right answer over what that caller may
see (``VISIBLE_TASK``: every task for managers and admins, their own for
developers; binds ``:me``, ``:today``, ``:week_start``, ``:week_end``). The
truth never reads RAG_CHUNK: it checks the facets the indexer wrote as well.

Scores per question, averaged per category:

* lookup: the target is the first citation; when the caller may not see it
  (or it does not exist), no citation and the same text as for an id that
  does not exist;
* filter: F1 of the cited records against the truth set; with more than
  ``list_limit`` true records, half for the exact total on the first line and
  half for the precision of the cited ones; none true: 1 for citing nothing;
* count: the exact number on the first line; per group, the share of groups
  whose "name: number" line is there (and no line for a group that is not);
* topic: the first citation is relevant.

Every question is also asked of the retrieval-only answerer
(``Chat(structured=False)``, the behaviour before structured answers), the baseline in
the same run. ``--llm-url`` asks an OpenAI-compatible endpoint as the model
(``--llm-model``, ``ORACLE_RAG_LLM_API_KEY`` if it needs a key), through the
streaming path, and reports per category whether the score with the model is
at least the score without it (never worse), the time to the first token of
structured answers (median, p95), the model's sentences checked and removed,
and an audit independent of that checking: numbers and anchors in the shown
text after the computed part that are in neither the computed part nor the
records cited (goal 0). ``--sample N`` keeps N questions spread over the
categories (a local model on CPU takes about a minute per answer).

A second domain, support tickets (``bench/qa_tickets.py``), is declared only in
configuration (a SQL-query source with meaning options) over a table the bench
creates, with its own questions (``bench/data/qa/tickets.json``, truth over
``VISIBLE_TICKET``). Both sets run against the same system, so the task
questions are answered with the tickets source present. ``--domain`` picks one.

The demo's open questions (``bench/demo_open.py``: why, workaround, decision, who found the cause,
what blocks it, a Spanish question about an English task, and two that nothing answers) are written
from the stories the generator composed, each with its answering task and the facts a correct answer
contains, and scored with ``bench/qa_open.py``'s scores (the answering task among the first 3
citations, the share of the facts in the answer, "nothing says so" when nothing answers), retrieval
alone against the product. ``--no-open`` skips them, ``--only-open`` asks only them.

Run: ``.venv/bin/python bench/qa.py [--data-dir DIR] [--today 2026-03-11] [--domain both] [--llm-url URL]``.
The first run seeds 2,000 tasks and 600 tickets and indexes them (1-3 minutes on
2 cores); later runs reuse the data directory. Writes ``bench/results/qa.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import re
import sys
import time
import unicodedata
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ROOT / "bench" / "data" / "qa" / "questions.json"
TICKET_QUESTIONS = ROOT / "bench" / "data" / "qa" / "tickets.json"
RESULTS = ROOT / "bench" / "results" / "qa.json"
sys.path.insert(0, str(ROOT))

import qa_tickets  # noqa: E402
import sqlalchemy as sa  # noqa: E402

from oracle_rag.answering.chat import Chat, LLMClient  # noqa: E402
from oracle_rag.answering.chat.answer import UNCHECKED  # noqa: E402
from oracle_rag.callers.access import load_caller  # noqa: E402
from oracle_rag.config import Settings, load_settings  # noqa: E402
from oracle_rag.demo.seed import seed  # noqa: E402
from oracle_rag.system import RagSystem  # noqa: E402

CATEGORIES = ("lookup", "filter", "count", "topic")
NONEXISTENT = 987654321
VISIBLE = """WITH VISIBLE_TASK AS (
  SELECT t.* FROM TASK t
  WHERE EXISTS (SELECT 1 FROM EMPLOYEE e WHERE e.EMPLOYEE_ID = :me
                AND (e.ROLE IN ('manager', 'admin') OR t.ASSIGNEE_ID = e.EMPLOYEE_ID))
)
"""


def fold(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).casefold()


def prepare(data_dir: Path, tasks: int, tickets: int, today: dt.date) -> RagSystem:
    rag = RagSystem(load_settings(env={}, data_dir=str(data_dir), sources={"tickets": qa_tickets.SOURCE}))
    rag.migrate(demo=True)
    report = seed(rag.engine, tasks, today=today)  # dated around the day the questions are asked on
    if report is not None:
        print(f"seeded {report.tasks} tasks; indexing...", flush=True)
    started = time.perf_counter()
    rag.backfill()
    rag.worker().drain()
    with rag.engine.begin() as conn:
        if qa_tickets.create(conn, tickets, today):
            print(f"created {tickets} tickets; indexing...", flush=True)
    for result in rag.sql_sources().sync():
        print(result.summary(), flush=True)
    print(f"index ready ({time.perf_counter() - started:.0f} s)", flush=True)
    return rag


def truth(conn: sa.Connection, q: dict[str, Any], binds: dict[str, Any], visible: str = VISIBLE) -> Any:
    rows = conn.execute(sa.text(visible + q["truth"]), binds).fetchall()
    if q["category"] == "count":
        if rows and len(rows[0]) == 1:
            return int(rows[0][0])
        return {("unassigned" if r[0] is None else str(r[0])): int(r[1]) for r in rows}
    return [(str(r[0]), str(r[1])) for r in rows]


def cited(answer: dict[str, Any]) -> list[tuple[str, str]]:
    return [(c["source_type"].upper(), str(c["source_id"])) for c in answer["citations"]]


def first_number(line: str) -> int | None:
    m = re.search(r"(?<![\w.-])(\d[\d,]*)(?![\w.-]*\d)", line)
    return int(m.group(1).replace(",", "")) if m else None


NO_VALUE = ("unassigned", "sin asignar", "none", "ninguno")


def _aliases(name: str) -> tuple[str, ...]:
    """How an answer may name a group: as the truth does, with spaces for '_', a NULL group in EN or ES."""
    if name == NO_VALUE[0]:
        return NO_VALUE
    return (name, name.replace("_", " "))


def score(
    q: dict[str, Any], want: Any, answer: dict[str, Any], *, list_limit: int, unseen_text: str
) -> float:
    got = cited(answer)
    text = answer["answer"].strip()
    first = text.split("\n", 1)[0]
    category = q["category"]
    if category == "lookup":
        if want:
            return 1.0 if got[:1] == want[:1] else 0.0
        return 1.0 if not got and unseen_text and text == unseen_text else 0.0
    if category == "filter":
        true = set(want)
        if not true:
            return 1.0 if not got else 0.0
        hits = len(true & set(got))
        precision = hits / len(got) if got else 0.0
        if len(true) > list_limit:
            return 0.5 * (first_number(first) == len(true)) + 0.5 * precision
        recall = hits / len(true)
        return 0.0 if hits == 0 else 2 * precision * recall / (precision + recall)
    if category == "count":
        if isinstance(want, int):
            return 1.0 if first_number(first) == want else 0.0
        lines = {fold(line.strip()) for line in text.split("\n")}
        right = sum(
            1 for name, n in want.items() if any(fold(f"{alias}: {n}") in lines for alias in _aliases(name))
        )
        listed = sum(1 for line in text.split("\n") if re.match(r"^[^:\n]{1,80}: \d+$", line.strip()))
        return right / max(len(want), listed, 1)
    return 1.0 if got[:1] and got[0] in set(want) else 0.0


_NUM = re.compile(r"(?<![\w#.])\d+(?:[.,]\d+)?(?![\w])")
_ANCHOR = re.compile(r"\b([A-Za-z][A-Za-z0-9_.\-]*)\s*#\s*(\w+)")


def audit(text: str, computed: str, cited_text: str) -> tuple[int, int]:
    """(numbers, anchors) in the model's part of ``text`` found in neither the computed part nor the cited
    records: a check that does not share code with oracle_rag.answering.chat.checking."""
    prose = text[len(computed) :] if computed and text.startswith(computed) else text
    prose = prose.split(UNCHECKED, 1)[0]  # what follows is the extractive answer: records quoted as stored
    prose = re.sub(
        r"(?m)^[ \t]*\d{1,3}[.)][ \t]+", "", prose
    )  # "3. [TASK #9] ...": a list's marker, not a number
    known = computed + "\n" + cited_text
    known_numbers = {n.replace(",", ".") for n in _NUM.findall(known)}
    known_anchors = {(t.upper(), i) for t, i in _ANCHOR.findall(known)}
    numbers = sum(
        1
        for n in _NUM.findall(_ANCHOR.sub(" ", prose))
        if n.replace(",", ".") not in known_numbers
        and not any(k.startswith(n.replace(",", ".")) for k in known_numbers)
    )
    anchors = sum(1 for t, i in _ANCHOR.findall(prose) if (t.upper(), i) not in known_anchors)
    return numbers, anchors


def sample(questions: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """About ``n`` questions: the same number per category, evenly spaced through each category's list."""
    by: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for q in questions:
        by[q["category"]].append(q)
    per = max(1, -(-n // max(1, len(by))))
    out: list[dict[str, Any]] = []
    for c in CATEGORIES:
        items = by.get(c, [])
        k = min(per, len(items))
        out.extend(items[j * len(items) // k] for j in range(k))
    return out


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(p * (len(ordered) - 1))))], 3)


def run(
    rag: RagSystem,
    questions: list[dict[str, Any]],
    chat: Chat,
    today: dt.date,
    label: str,
    mode: str,
    visible: str = VISIBLE,
    *,
    streamed: bool = False,
    plain: Chat | None = None,
) -> dict[str, Any]:
    monday = today - dt.timedelta(days=today.weekday())
    per: dict[str, list[float]] = defaultdict(list)
    rows = []
    started = time.perf_counter()
    for q in questions:
        binds = {
            "me": q["as"],
            "today": today.isoformat(),
            "week_start": monday.isoformat(),
            "week_end": (monday + dt.timedelta(days=6)).isoformat(),
        }
        with rag.engine.connect() as conn:
            want = truth(conn, q, binds, visible)
            caller = load_caller(conn, q["as"])
        unseen = ""
        if q["category"] == "lookup" and not want:
            # the same question about an id that exists nowhere: a hidden record must read exactly like it
            missing = re.sub(r"\d+", str(NONEXISTENT), q["question"], count=1)
            unseen = chat.answer(missing, caller, store=False, mode=mode).answer.strip()
        t0 = time.perf_counter()
        extra: dict[str, Any] = {}
        if streamed:
            first_token = None
            done = None
            for event in chat.stream(q["question"], caller, store=False, mode=mode):
                if event.kind == "token" and first_token is None:
                    first_token = time.perf_counter() - t0
                elif event.kind == "done":
                    done = event.answer
                elif event.kind == "error" and event.error is not None:
                    raise event.error
            assert done is not None
            answer = done.to_dict()
            computed = plain.answer(q["question"], caller, store=False, mode=mode).answer if plain else ""
            # the records cited (their anchors: the checker let only given records be cited) and their snippets
            cited_text = "\n".join(f"{c['anchor']} {c['snippet']}" for c in answer["citations"])
            if answer["route"] != "structured":  # what the guarded query returned is computed too
                agg = answer["aggregate"] or {}
                computed = "\n".join(" ".join(str(v) for v in row) for row in agg.get("rows") or [])
                cited_text += "\n" + computed
                computed = ""
            numbers, anchors = audit(answer["answer"], computed, cited_text)
            extra = {
                "ttft": round(first_token or 0.0, 3),
                "checked": answer["checked"],
                "route": answer["route"],
                "answer": answer["answer"],
                "unsupported_numbers": numbers,
                "unsupported_anchors": anchors,
            }
        else:
            answer = chat.answer(q["question"], caller, store=False, mode=mode).to_dict()
        seconds = time.perf_counter() - t0
        s = score(q, want, answer, list_limit=rag.settings.list_limit, unseen_text=unseen)
        per[q["category"]].append(s)
        rows.append(
            {
                "id": q["id"],
                "category": q["category"],
                "lang": q["lang"],
                "as": q["as"],
                "question": q["question"],
                "score": round(s, 4),
                "seconds": round(seconds, 3),
                "answerer": answer["answerer"],
                "first_line": answer["answer"].split("\n", 1)[0][:200],
                "cited": len(answer["citations"]),
                "truth": want if isinstance(want, int | dict) else len(want),
                **extra,
            }
        )
        if streamed:
            print(
                f"  {q['id']} {s:.2f} {seconds:.0f} s ttft {extra['ttft']:.2f} s checked {extra['checked']}",
                flush=True,
            )
    scores = {c: round(sum(v) / len(v), 4) for c, v in per.items() if v}
    mean = round(sum(scores.values()) / len(scores), 4) if scores else 0.0
    print(
        f"\n{label}: "
        + "  ".join(f"{c} {scores.get(c, float('nan')):.3f} ({len(per[c])})" for c in CATEGORIES)
        + f"  mean {mean:.3f}  [{time.perf_counter() - started:.1f} s]"
    )
    out: dict[str, Any] = {"label": label, "scores": scores, "mean": mean, "questions": rows}
    if streamed:
        ttft = [r["ttft"] for r in rows if r.get("route") == "structured"]
        out["structured_ttft_s"] = {
            "median": percentile(ttft, 0.5),
            "p95": percentile(ttft, 0.95),
            "n": len(ttft),
        }
        out["sentences"] = sum((r["checked"] or {}).get("sentences", 0) for r in rows)
        out["removed"] = sum((r["checked"] or {}).get("removed", 0) for r in rows)
        out["unsupported_shown"] = {
            "numbers": sum(r["unsupported_numbers"] for r in rows),
            "anchors": sum(r["unsupported_anchors"] for r in rows),
        }
        print(
            f"structured TTFT with the model: {out['structured_ttft_s']}; model sentences {out['sentences']}, "
            f"removed {out['removed']}; shown numbers/anchors not in the computed result or cited records: "
            f"{out['unsupported_shown']}"
        )
    return out


TASK_TEXTS = """SELECT 'TASK #' || t.TASK_ID, t.TITLE, t.DESCRIPTION, e.FIRST_NAME || ' ' || e.LAST_NAME, c.BODY
FROM TASK t LEFT JOIN TASK_COMMENT c ON c.TASK_ID = t.TASK_ID LEFT JOIN EMPLOYEE e ON e.EMPLOYEE_ID = c.AUTHOR_ID
ORDER BY t.TASK_ID, c.CREATED_AT, c.COMMENT_ID"""


def run_open(
    rag: RagSystem, tasks: int, chat: Chat, plain: Chat, mode: str, model: Chat | None = None
) -> list[dict[str, Any]]:
    """The demo's open questions (bench/demo_open.py), scored as bench/qa_open.py scores the help desk's."""
    import demo_open
    import qa_open

    questions = demo_open.questions(tasks)
    texts: dict[str, str] = {}
    with rag.engine.connect() as conn:
        for anchor, title, description, author, body in conn.execute(sa.text(TASK_TEXTS)):
            if anchor not in texts:
                texts[anchor] = f"{title}\n{description or ''}"
            if body is not None:
                texts[anchor] += f"\n{author}: {body}"
        callers = {who: load_caller(conn, who) for who in {q.get("as", qa_open.ASKER) for q in questions}}
    demo_open.check(questions, texts)
    runs = [
        qa_open.run_chat(rag, plain, questions, "tasks, open: retrieval only, no model", mode, callers),
        qa_open.run_chat(rag, chat, questions, "tasks, open: product, no model", mode, callers),
    ]
    if model is not None:
        runs.append(
            qa_open.run_chat(
                rag, model, questions, "tasks, open: product, with the model", mode, callers, model=True
            )
        )
    print()
    for r in runs:
        print(qa_open.line(r))
        print(
            "    per kind (record@3 / facts, or no_answer): "
            + "  ".join(
                f"{k} " + "/".join(f"{s[m]:.2f}" for m in ("record@3", "facts", "no_answer") if m in s)
                for k, s in r["per_kind"].items()
            )
        )
    return runs


def load_questions(path: Path) -> list[dict]:
    """A question set's questions; items marked ``needs_truth`` (``oracle-rag feedback export``) are left out
    until a person writes their truth."""
    questions = json.loads(path.read_text(encoding="utf-8"))["questions"]
    ready = [q for q in questions if not q.get("needs_truth")]
    if len(ready) < len(questions):
        print(f"{path}: {len(questions) - len(ready)} question(s) still need their truth; skipped")
    return ready


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The retrieval mode and the model a run is also made with (this bench and qa_open.py)."""
    parser.add_argument("--mode", default="hybrid", choices=("semantic", "keyword", "hybrid"))
    parser.add_argument(
        "--llm-url", default=None, help="an OpenAI-compatible endpoint (also run with the model)"
    )
    parser.add_argument("--llm-model", default="local")
    parser.add_argument("--llm-timeout", type=float, default=300.0)


def model_settings(settings: Settings, args: argparse.Namespace) -> Settings:
    """``settings`` with the model of ``add_model_arguments``; no retries: a failed call is measured."""
    return settings.with_overrides(
        llm_url=args.llm_url,
        llm_model=args.llm_model,
        llm_timeout_s=args.llm_timeout,
        llm_max_retries=0,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--data-dir", default=str(ROOT / ".oracle-rag" / "bench-qa"))
    parser.add_argument("--questions", default=str(QUESTIONS))
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--tickets", type=int, default=qa_tickets.TICKETS)
    parser.add_argument("--ticket-questions", default=str(TICKET_QUESTIONS))
    parser.add_argument("--domain", default="both", choices=("tasks", "tickets", "both"))
    parser.add_argument(
        "--today", default="2026-03-11", help="the date 'overdue' and 'this week' are relative to"
    )
    add_model_arguments(parser)
    parser.add_argument(
        "--sample", type=int, default=0, help="ask only N questions, spread over the categories"
    )
    parser.add_argument("--verbose", action="store_true", help="print every question that scored below 1")
    parser.add_argument(
        "--no-open",
        dest="open",
        action="store_false",
        help="skip the demo's open questions (bench/demo_open.py)",
    )
    parser.add_argument("--only-open", action="store_true", help="ask only the demo's open questions")
    args = parser.parse_args()
    today = dt.date.fromisoformat(args.today)
    sets = []
    if args.domain in ("tasks", "both"):
        sets.append(("tasks", load_questions(Path(args.questions)), VISIBLE))
    if args.domain in ("tickets", "both"):
        sets.append(("tickets", load_questions(Path(args.ticket_questions)), qa_tickets.VISIBLE))
    if args.only_open:
        sets = []
    if args.sample:
        sets = [(domain, sample(questions, args.sample), visible) for domain, questions, visible in sets]
    rag = prepare(Path(args.data_dir), args.tasks, args.tickets, today)
    list_limit = rag.settings.list_limit
    clock = lambda: today  # noqa: E731
    runs = []
    open_runs: list[dict[str, Any]] = []
    try:
        for domain, questions, visible in sets:
            runs += [
                run(
                    rag,
                    questions,
                    Chat(rag, None, structured=False, today=clock),
                    today,
                    f"{domain}: baseline (retrieval only, no model)",
                    args.mode,
                    visible,
                ),
                run(
                    rag,
                    questions,
                    Chat(rag, None, today=clock),
                    today,
                    f"{domain}: structured, no model",
                    args.mode,
                    visible,
                ),
            ]
            if args.llm_url:
                settings = model_settings(rag.settings, args)
                runs.append(
                    run(
                        rag,
                        questions,
                        Chat(rag, LLMClient(settings), settings=settings, today=clock),
                        today,
                        f"{domain}: structured, model at {args.llm_url}",
                        args.mode,
                        visible,
                        streamed=True,
                        plain=Chat(rag, None, today=clock),
                    )
                )
        if args.domain in ("tasks", "both") and (args.open or args.only_open):
            model = None
            if args.llm_url:
                settings = model_settings(rag.settings, args)
                model = Chat(rag, LLMClient(settings), settings=settings, today=clock)
            open_runs = run_open(
                rag,
                args.tasks,
                Chat(rag, None, today=clock),
                Chat(rag, None, structured=False, today=clock),
                args.mode,
                model,
            )
    finally:
        rag.close()
    base: dict[str, Any] = runs[0] if runs else {}
    for r in runs:
        if "baseline" in r["label"]:
            base = r
            continue
        ratios = {
            c: round(r["scores"][c] / base["scores"][c], 2) if base["scores"].get(c) else None
            for c in r["scores"]
        }
        r["ratio_to_baseline"] = ratios
        print(
            f"{r['label']} / baseline: "
            + "  ".join(f"{c} {'inf' if v is None else f'{v:.2f}x'}" for c, v in ratios.items())
        )
        if args.verbose:
            for row in r["questions"]:
                if row["score"] < 1:
                    print(
                        f"  {row['id']} {row['score']:.2f} {row['question']!r} -> {row['first_line']!r} "
                        f"(cited {row['cited']}, truth {row['truth']})"
                    )
    structured = {
        r["label"].split(":")[0]: r["mean"] for r in runs if r["label"].endswith("structured, no model")
    }
    if args.llm_url:
        for without_run, model_run in zip(runs[1::3], runs[2::3], strict=True):
            without, model = without_run["scores"], model_run["scores"]
            worse = {c: (without[c], model.get(c)) for c in without if model.get(c, 0.0) < without[c]}
            print(
                f"{model_run['label']} vs without: "
                + "  ".join(f"{c} {model.get(c, 0):.3f} vs {without[c]:.3f}" for c in without)
                + ("  (never worse)" if not worse else f"  WORSE in {sorted(worse)}")
            )
            model_run["never_worse"] = not worse
    goals = {"tasks": 1.0, "tickets": 0.95}
    goal = all(structured[d] >= goals[d] for d in structured)
    print(
        "goal (tasks 1.00, tickets >= 0.95 without a model): "
        + ("met" if goal else "NOT met")
        + " "
        + ", ".join(f"{d} {m:.3f}" for d, m in structured.items())
    )
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(
        json.dumps(
            {
                "bench": "qa",
                "questions_file": str(args.questions),
                "ticket_questions_file": str(args.ticket_questions),
                "domain": args.domain,
                "today": args.today,
                "mode": args.mode,
                "list_limit": list_limit,
                "python": platform.python_version(),
                "runs": runs,
                "goal_met": goal,
                "open_runs": open_runs,
            },
            indent=2,
            ensure_ascii=False,
            default=str,
        )
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
