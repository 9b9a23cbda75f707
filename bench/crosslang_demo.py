"""Spanish questions about the demo's English tasks, over all 2,000 tasks as the product indexes them.

A check of bench/embedding_models.py's cross-language result on other
questions and on the product's own chunk text: the demo's tasks (default
seed) rendered as the reference source renders them (``[TASK #n] title``,
status, project, assignee, description, comments: the headers and field
labels included) and cut by the product's ``ChunkPlan``; a task ranks by
its nearest chunk (exact cosine, the semantic mode). The questions are
``bench/model_switch.py``'s ten Spanish questions about English tasks (the
issue's two examples first), none of them in bench/data/crosslang.

For each model: the rank of the first task on the question's topic (top
200), how many of the top 10 are on it. Models: all-MiniLM-L6-v2 (the
baseline of this run), multilingual-e5-small, and e5's graph built without
the removal of the English–Spanish direction (``language=False``, see
oracle_rag/embedding/e5_language.py). Also e5 on title and description
alone, without the rendered headers and labels, to see whether they hide
the content.

Run: ``.venv/bin/python bench/crosslang_demo.py [--tasks 2000]`` (needs ``make
e5``; embeds the tasks four times: 5-15 minutes on 2 shared cores for 2,000). Writes
``bench/results/crosslang_demo.json``.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "crosslang_demo.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from embedding_models import skipped_without_e5  # noqa: E402  (bench/ is not a package)
from model_switch import CROSS  # noqa: E402

from oracle_rag.config import load_settings  # noqa: E402
from oracle_rag.demo.seed import EN_OBJECTS, ES_OBJECTS, generate  # noqa: E402
from oracle_rag.embedding import EmbeddingRuntime, e5, ensure_model  # noqa: E402
from oracle_rag.embedding.catalog import E5_SMALL, MINILM, EmbeddingModel  # noqa: E402
from oracle_rag.sources.reference import render_task  # noqa: E402
from oracle_rag.text.chunking import ChunkPlan  # noqa: E402


def task_row(
    t: dict[str, Any], name: tuple[str | None, str | None], sprints: dict[int, str], projects: dict[int, str]
) -> dict[str, Any]:
    """A generated demo task as the reference source's query returns it (what ``render_task`` reads);
    ``name`` is its assignee's (first, last)."""
    return {
        "TASK_ID": t["id"],
        "TITLE": t["title"],
        "STATUS": t["status"],
        "PRIORITY": t["priority"],
        "SPRINT_NAME": sprints.get(t["sprint"]),
        "PROJECT_NAME": projects.get(t["project"]),
        "ASSIGNEE_ID": t["assignee"],
        "FIRST_NAME": name[0],
        "LAST_NAME": name[1],
        "STORY_POINTS": t["points"],
        "ESTIMATED_HOURS": t["hours"],
        "DUE_DATE": t["due"],
        "DESCRIPTION": t["description"],
    }


def demo_tasks(count: int) -> tuple[dict[int, str], dict[int, str], dict[int, str]]:
    """Task id -> rendered text, -> title and description, -> topic (the object of its title)."""
    data = generate(count, 42, today=dt.date(2026, 1, 5))
    people = {e["id"]: e for e in data["employees"]}
    projects = {p["id"]: p["name"] for p in data["projects"]}
    sprints = {s["id"]: s["name"] for s in data["sprints"]}
    comments: dict[int, list[dict[str, Any]]] = collections.defaultdict(list)
    for c in data["comments"]:
        author = people[c["author"]]
        comments[c["task"]].append(
            {"FIRST_NAME": author["first"], "LAST_NAME": author["last"], "BODY": c["body"]}
        )
    topics = sorted(EN_OBJECTS + ES_OBJECTS, key=len, reverse=True)
    rendered: dict[int, str] = {}
    short: dict[int, str] = {}
    topic: dict[int, str] = {}
    for t in data["tasks"]:
        who = people.get(t["assignee"])
        row = task_row(t, (who["first"], who["last"]) if who else (None, None), sprints, projects)
        rendered[t["id"]] = render_task(row, comments[t["id"]])
        short[t["id"]] = " ".join(p for p in (t["title"], t["description"]) if p)
        topic[t["id"]] = next(x for x in topics if t["title"].endswith(" " + x))
    return rendered, short, topic


def ask(
    runtime: EmbeddingRuntime, model: EmbeddingModel, texts: dict[int, str], topic: dict[int, str]
) -> dict[str, Any]:
    plan = ChunkPlan()
    owner: list[int] = []
    chunks: list[str] = []
    for task_id, text in texts.items():
        for chunk in plan.split(text):
            owner.append(task_id)
            chunks.append(model.passage_text(chunk))
    started = time.perf_counter()
    vectors = runtime.embed_batch(chunks)
    seconds = time.perf_counter() - started
    rows = []
    for question, wanted in CROSS.items():
        scores = vectors @ runtime.embed(model.query_text(question))
        ranked: list[int] = []
        for i in np.argsort(-scores, kind="stable"):
            if owner[i] not in ranked:
                ranked.append(owner[i])
                if len(ranked) == 200:
                    break
        first = next((k + 1 for k, t in enumerate(ranked) if topic[t] == wanted), None)
        rows.append(
            {
                "question": question,
                "topic": wanted,
                "first_rank": first,
                "on_topic_in_top10": sum(topic[t] == wanted for t in ranked[:10]),
            }
        )
    return {
        "chunks": len(chunks),
        "embed_s": round(seconds, 1),
        "questions": rows,
        "found_in_top10": sum(1 for r in rows if r["first_rank"] is not None and r["first_rank"] <= 10),
        "on_topic_in_top10": sum(r["on_topic_in_top10"] for r in rows),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=2000, help="demo tasks to index (default: 2000)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON results")
    args = parser.parse_args(argv)
    if skipped_without_e5(args.out):
        return 0
    rendered, short, topic = demo_tasks(args.tasks)
    data_path = load_settings().data_path
    report: dict[str, Any] = {
        "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "tasks": len(rendered),
        "runs": {},
    }
    minilm = EmbeddingRuntime(ensure_model(data_path, model=MINILM)).load()
    e5_rt = EmbeddingRuntime(ensure_model(data_path, model=E5_SMALL)).load()
    report["runs"]["all-MiniLM-L6-v2"] = ask(minilm, MINILM, rendered, topic)
    report["runs"]["multilingual-e5-small"] = ask(e5_rt, E5_SMALL, rendered, topic)
    report["runs"]["multilingual-e5-small, title and description only"] = ask(e5_rt, E5_SMALL, short, topic)
    with tempfile.TemporaryDirectory() as tmp:
        plain = EmbeddingRuntime(e5.build_model(Path(tmp) / e5.MODEL_FILENAME, language=False)).load()
        report["runs"]["multilingual-e5-small without the removal"] = ask(plain, E5_SMALL, rendered, topic)
    report["load_after"] = os.getloadavg()[0]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{'':52} {'found in top 10':>16} {'on topic in top 10':>19}  first ranks")
    for name, run in report["runs"].items():
        ranks = [r["first_rank"] for r in run["questions"]]
        print(f"{name:52} {run['found_in_top10']:>13}/10 {run['on_topic_in_top10']:>15}/100  {ranks}")
    print(f"load average {report['load_before']:.1f} -> {report['load_after']:.1f}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
