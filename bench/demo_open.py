"""The demo's open questions for bench/qa.py, in the shape of bench/qa_open.py's set.

The questions come from ``oracle_rag.demo.questions.open_questions`` (written from the stories the
generator composed: the answering task and the facts are known by construction), plus two the
package does not write: Spanish questions about English tasks (the Spanish names of the components
are the cross-language set's, ``bench/data/crosslang/generate.py``), and two that nothing answers (a
component and a customer that never occur together). The kinds are qa_open's, and so are the scores
(``qa_open.score``). None is held out: the answers to all of them were read while tuning the
sentence choice, so they measure what was tuned, and bench/qa_open.py's held-out third is the
unseen measure.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path
from typing import Any

from oracle_rag.demo.questions import FORMS, answerable, open_questions
from oracle_rag.demo.seed import task_stories
from oracle_rag.demo.stories import EN_CUSTOMERS, EN_KITS

ROOT = Path(__file__).resolve().parent.parent


def _spanish_names() -> dict[str, str]:
    """The Spanish names of the English components, as the cross-language set writes them."""
    spec = importlib.util.spec_from_file_location(
        "crosslang_generate", ROOT / "bench/data/crosslang/generate.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return dict(module.EN_TOPICS_IN_SPANISH)


def questions(tasks: int = 2000, seed: int = 42) -> list[dict[str, Any]]:
    """The open questions, each with ``answers`` (``TASK #id``) and ``facts``."""
    out: list[dict[str, Any]] = []

    def add(kind: str, lang: str, question: str, answers: list[str], facts: list[str]) -> None:
        out.append(
            {
                "id": f"demo{len(out) + 1}",
                "kind": kind,
                "lang": lang,
                "held_out": False,  # every answer was read while tuning the sentence choice
                "question": question,
                "answers": answers,
                "facts": facts,
            }
        )

    planned = open_questions(tasks, seed)
    for q in planned:
        add(q.kind, q.lang, q.question, [f"TASK #{q.task}"], list(q.facts))
    stories = task_stories(tasks, seed)
    names = _spanish_names()
    crossing = [
        (t, s) for t, s in answerable(stories, False, {q.component for q in planned}) if s.component in names
    ]
    for task, story in crossing[:2]:  # a Spanish question, the answer an English task's root cause
        add(
            "cross",
            "es",
            f"¿Cuál es la causa del problema con {names[story.component]} en {story.customer}?",
            [f"TASK #{task}"],
            [story.cause],
        )
    pairs = Counter((s.component, s.customer) for s in stories.values())
    missing = [(c, who) for c in sorted(EN_KITS) for who in EN_CUSTOMERS if (c, who) not in pairs]
    for component, customer in missing[:: max(1, len(missing) // 2)][:2]:
        add("none", "en", FORMS["decision"][0].format(c=component, who=customer), [], [])
    return out


def check(qs: list[dict[str, Any]], texts: dict[str, str]) -> None:
    """Every fact is in its answering task's text as stored (``texts``: anchor -> title, description and
    comments with their authors' names): a data directory seeded by another generator fails here."""
    for q in qs:
        for anchor in q["answers"]:
            missing = [f for f in q["facts"] if f not in texts.get(anchor, "")]
            if missing:
                raise SystemExit(
                    f"{q['id']}: {missing} not in {anchor} as stored: seeded by another generator? "
                    "remove the data directory"
                )
