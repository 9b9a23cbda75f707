"""The demo's free text: one specific story per task, from a stream of its own.

The generator's structured draws (titles, statuses, assignees, estimates,
dates, thread shapes and authors) are what tests elsewhere count and filter
on; the stories must not move them, must not repeat, and must say what the
open questions built from them expect (oracle_rag/demo/questions.py).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest

from oracle_rag.demo.questions import EXAMPLES, OPEN_EXAMPLES, STRUCTURED_EXAMPLES, open_questions
from oracle_rag.demo.seed import generate, task_stories
from oracle_rag.demo.stories import EN_KITS, ES_KITS, PARTS

DAY = dt.date(2026, 3, 11)


@pytest.fixture(scope="module")
def demo() -> dict:
    return generate(2000, 42, DAY)


def test_every_symptom_has_a_cause_and_a_workaround_that_fit_it() -> None:
    for kits in (EN_KITS, ES_KITS):
        for component, kit in kits.items():
            for i in range(len(kit.symptoms)):
                assert kit.fitting(kit.causes, i) and kit.fitting(kit.workarounds, i), (component, i)


def test_no_two_tasks_tell_the_same_story(demo: dict) -> None:
    stories = task_stories(2000, 42)
    symptoms = Counter(s.symptom for s in stories.values())
    assert symptoms.most_common(1)[0][1] == 1
    descriptions = [t["description"] for t in demo["tasks"] if t["description"]]
    assert len(set(descriptions)) == len(descriptions) > 1800
    # varied parts, not one template: many distinct causes, workarounds and decisions
    every_cause = sum(len(k.causes) for kits in (EN_KITS, ES_KITS) for k in kits.values())
    assert len({s.cause for s in stories.values()}) == every_cause
    assert len({s.decision for s in stories.values()}) > 400
    # the former templates are gone
    assert not any("p95 latency went from 200 ms" in d for d in descriptions)


def test_the_thread_tells_the_parts_in_order_each_by_its_author(demo: dict) -> None:
    stories = task_stories(2000, 42)
    bodies: dict[int, list[str]] = {}
    for c in demo["comments"]:
        bodies.setdefault(c["task"], []).append(c["body"])
    for task in demo["tasks"]:
        story = stories[task["id"]]
        thread = bodies.get(task["id"], [])
        assert story.comments == thread
        told = list(story.told_by)
        assert told == list(PARTS[: len(told)]) and len(told) == min(len(thread), len(PARTS))
        for part, i in story.told_by.items():
            assert getattr(story, part) in thread[i]
        if task["description"] is not None:
            assert story.symptom[1:] in task["description"]
            for part in PARTS:  # what no comment tells, the description does
                if part not in story.told_by:
                    assert getattr(story, part) in task["description"]
        if task["status"] == "BLOCKED" and task["description"] is not None:
            assert story.blocker and story.blocker in task["description"]
        assert (story.blocker is None) == (task["status"] != "BLOCKED")


def test_stories_do_not_depend_on_the_number_of_tasks_or_the_day(demo: dict) -> None:
    small = generate(300, 42, dt.date(2025, 6, 1))
    assert [t["description"] for t in small["tasks"]] == [t["description"] for t in demo["tasks"][:300]]
    assert [c["body"] for c in small["comments"]] == [
        c["body"] for c in demo["comments"][: len(small["comments"])]
    ]
    assert generate(50, 7, DAY)["tasks"][0]["description"] != demo["tasks"][0]["description"]


def test_both_languages_keep_their_share(demo: dict) -> None:
    spanish = [t for t in demo["tasks"] if t["title"].split(" ", 1)[1] in ES_KITS]
    assert 0.25 < len(spanish) / len(demo["tasks"]) < 0.35
    stories = task_stories(2000, 42)
    assert all(stories[t["id"]].component in ES_KITS for t in spanish)


def test_open_questions_have_one_answering_task_that_holds_their_facts(demo: dict) -> None:
    people = {e["id"]: f"{e['first']} {e['last']}" for e in demo["employees"]}
    texts = {t["id"]: f"{t['title']}\n{t['description'] or ''}" for t in demo["tasks"]}
    for c in demo["comments"]:
        texts[c["task"]] += f"\n{people[c['author']]}: {c['body']}"
    stories = task_stories(2000, 42)
    questions = open_questions(2000, 42)
    assert len(questions) >= 12 and {q.kind for q in questions} == {
        "why",
        "workaround",
        "decision",
        "who",
        "status",
    }
    for q in questions:
        assert all(f and f in texts[q.task] for f in q.facts), q
        same = [t for t, s in stories.items() if (s.component, s.customer) == (q.component, q.customer)]
        assert same == [q.task]
        assert q.customer in q.question and q.component in q.question


def test_the_page_examples_are_answered_in_any_demo_of_300_tasks_or_more() -> None:
    assert 4 <= len(EXAMPLES) <= 6 and set(EXAMPLES) == set(STRUCTURED_EXAMPLES) | set(OPEN_EXAMPLES)
    by_text = {q.question: q for q in open_questions(2000, 42)}
    for example in OPEN_EXAMPLES:
        assert example in by_text and by_text[example].task <= 300, example
