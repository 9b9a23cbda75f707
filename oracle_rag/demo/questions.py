"""Questions the demo data answers, and the examples the chat page offers in demo mode.

Open questions are written from the stories the generator composed
(:mod:`.stories`): each names a component and a customer that occur together
in exactly one task, so that task answers it by construction, and the facts a
correct answer contains are the parts asked about (the root cause, the
workaround, the decision, what blocks it, or who found the cause). The
benchmarks score the product on them (``bench/demo_open.py``); the page shows a
few of them next to structured questions, so a newcomer's first question has
an answer in the data.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from oracle_rag.demo.seed import generate, task_stories
from oracle_rag.demo.stories import EN_KITS, ES_KITS, Story


@dataclass(frozen=True)
class OpenQuestion:
    kind: str  # why, workaround, decision, who, status
    lang: str  # "en" or "es", the language of the answering task
    question: str
    task: int
    facts: tuple[str, ...]
    component: str
    customer: str


# kind -> (English form, Spanish form); {c} the component, {who} the customer
FORMS: dict[str, tuple[str, str]] = {
    "why": (
        "What is the root cause of the {c} problem at {who}?",
        "¿Cuál es la causa del problema con {c} en {who}?",
    ),
    "workaround": (
        "Is there a workaround for the {c} issue at {who}?",
        "¿Hay alguna solución provisional para {c} en {who}?",
    ),
    "decision": ("What did we decide about the {c} problem of {who}?", "¿Qué decidimos sobre {c} de {who}?"),
    "who": (
        "Who found the root cause of the {c} problem at {who}?",
        "¿Quién encontró la causa del problema con {c} en {who}?",
    ),
    "status": ("What is blocking the {c} work for {who}?", "¿Qué está bloqueando {c} para {who}?"),
}
# (kind, language of the answering task, how many)
PLAN = (
    ("why", "en", 3),
    ("why", "es", 1),
    ("workaround", "en", 2),
    ("workaround", "es", 1),
    ("decision", "en", 2),
    ("decision", "es", 1),
    ("who", "en", 1),
    ("who", "es", 1),
    ("status", "en", 2),
)


def answerable(stories: dict[int, Story], spanish: bool, exclude: set[str]) -> list[tuple[int, Story]]:
    """Tasks a question can name unambiguously: described, and the only one of their component at
    their customer."""
    pairs = Counter((s.component, s.customer) for s in stories.values())
    kits = ES_KITS if spanish else EN_KITS
    return [
        (t, s)
        for t, s in sorted(stories.items())
        if s.component in kits
        and s.component not in exclude
        and s.description is not None
        and pairs[(s.component, s.customer)] == 1
    ]


def open_questions(tasks: int = 2000, seed: int = 42) -> list[OpenQuestion]:
    """The planned open questions, one component each, the earliest tasks that fit first."""
    stories = task_stories(tasks, seed)
    data = generate(tasks, seed)
    people = {e["id"]: f"{e['first']} {e['last']}" for e in data["employees"]}
    authors: dict[int, list[int]] = {}
    for c in data["comments"]:
        authors.setdefault(c["task"], []).append(c["author"])
    used: set[str] = set()
    out: list[OpenQuestion] = []
    for kind, lang, count in PLAN:
        spanish = lang == "es"
        for task, story in answerable(stories, spanish, used):
            if count == 0:
                break
            if kind == "who" and "cause" not in story.told_by or kind == "status" and story.blocker is None:
                continue
            facts = {
                "why": story.cause,
                "workaround": story.workaround,
                "decision": story.decision,
                "status": story.blocker or "",
                "who": people[authors[task][story.told_by["cause"]]] if "cause" in story.told_by else "",
            }
            form = FORMS[kind][1 if spanish else 0]
            out.append(
                OpenQuestion(
                    kind,
                    lang,
                    form.format(c=story.component, who=story.customer),
                    task,
                    (facts[kind],),
                    story.component,
                    story.customer,
                )
            )
            used.add(story.component)
            count -= 1
    return out


# The chat page's examples in demo mode: structured questions the demo answers exactly, and open ones
# from open_questions() (default seed) whose answering task is among the first 300, so they hold for any
# demo of 300 to 2,000 tasks (tests/test_demo_stories.py checks both).
STRUCTURED_EXAMPLES = (
    "Which tasks in Atlas Billing are blocked?",
    "How many tasks are in progress per project?",
    "¿Qué tareas están bloqueadas en el sprint actual?",
)
OPEN_EXAMPLES = (
    "What is the root cause of the push notification delivery problem at Greenfield Farms?",
    "¿Hay alguna solución provisional para el rendimiento del panel de control en Lácteos Pradera?",
    "Who found the root cause of the offline sync conflicts problem at Lakeside Dental?",
)
EXAMPLES = STRUCTURED_EXAMPLES[:2] + OPEN_EXAMPLES[:1] + STRUCTURED_EXAMPLES[2:] + OPEN_EXAMPLES[1:]
