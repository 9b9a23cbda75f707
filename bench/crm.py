"""A CRM nobody here wrote: declared sources, declared access, declared people, no reference app.

The deployment a new user would make for a sales team, built from its own
deterministic data in the product's SQLite file:

* ``deals``: 400 deals, each owned by a rep (some by nobody, some by a rep who
  left and has no name any more) and shared with the rep's team (``access =
  ["owner", "group"]``, ``group_column = "team"``);
* ``notes``: account notes shared with teams through an ACL (``acl_query``),
  each written by a rep (its person facet is the author);
* ``[access]``: roles and teams from the CRM's own tables (``roles_query``,
  ``groups_query``), ``sales_manager`` reads everything;
* ``[people]``: the reps' names from ``sales_rep``;
* no EMPLOYEE, TASK, SPRINT or PROJECT table.

Questions are asked by a rep, a rep in two teams and a manager; the truth is
computed here in Python from the rows and the declared policy, never through
the product. Categories: ``person`` (a question naming a person or asking
who), ``count``, ``filter``, ``lookup``. Every answer is also checked for a
rep id shown where the rep has a name (``ids_shown``).

As a bench: ``.venv/bin/python bench/crm.py`` builds the deployment in a
temporary directory, asks every question with ``[people]`` declared and, as
the baseline in the same run, without it (ids only), and prints the share of
questions answered right and of person answers that name people, for both.
Writes ``bench/results/crm.json``. tests/test_answers_crm.py runs the same world.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import random
import re
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "crm.json"
TODAY = dt.date(2026, 3, 11)

# id, name, teams, role (rep ids are distinctive, so an id in an answer is not mistaken for a count)
REPS = [
    (9101, "Tomás Herrera", ("north",), "rep"),
    (9102, "Ana Pérez", ("north",), "rep"),
    (9103, "José Núñez", ("south",), "rep"),
    (9104, "Chloé Martin", ("south",), "rep"),
    (9105, "Zoë Okafor", ("enterprise",), "rep"),
    (9106, "Björn Lindqvist", ("enterprise",), "rep"),
    (9107, "Marta Ruiz", ("north", "south"), "rep"),
    (9108, "Li Wei", ("enterprise",), "rep"),
    (9109, "Óscar Ibáñez", ("south",), "sales_manager"),
    (9110, "Ingrid Dahl", (), "sales_manager"),
]
FORMER = 9199  # owns deals, has no row in sales_rep: shown as the id
TEAMS = ("north", "south", "enterprise")
STAGES = ("PROSPECT", "QUALIFIED", "PROPOSAL", "NEGOTIATION", "WON", "LOST")
DONE = ("WON", "LOST")
REGIONS = ("AMER", "EMEA", "APAC")
DEALS = 400
NOTES = 160
PRODUCTS = (
    "analytics suite",
    "payroll module",
    "data warehouse",
    "mobile CRM",
    "support plan",
    "API gateway",
    "security audit",
    "training package",
)
COMPANIES = (
    "Acme",
    "Globex",
    "Initech",
    "Umbrella",
    "Soylent",
    "Hooli",
    "Vandelay",
    "Stark",
    "Wayne",
    "Tyrell",
    "Cyberdyne",
    "Wonka",
)

PEOPLE_QUERY = "SELECT rep_id, full_name FROM sales_rep"
SOURCES: dict[str, dict[str, Any]] = {
    "deals": {
        "query": "SELECT deal_id AS id, name AS title, description AS content, stage, amount, close_date, region, "
        "rep_id, team FROM deal",
        "owner_column": "rep_id",
        "access": ["owner", "group"],
        "group_column": "team",
        "facet_columns": {"stage": "enum", "region": "enum", "amount": "number", "close_date": "date"},
        "words": ["opportunity", "opportunities", "oportunidad", "oportunidades", "trato", "tratos"],
        "lifecycle": "stage",
        "done_values": list(DONE),
        "facet_cues": {
            "rep_id": ["rep", "reps", "seller", "sellers", "vendedor", "vendedores"],
            "close_date": ["closing", "closes", "cierre"],
        },
        "value_words": {"WON": ["ganado", "ganados", "ganada", "ganadas"], "LOST": ["perdido", "perdidos"]},
        "nouns_es": ["trato", "tratos"],
        "labels_es": {"rep_id": "vendedor", "stage": "etapa"},
        "display": ["stage", "amount", "rep_id", "close_date"],
    },
    "notes": {
        "query": "SELECT n.note_id AS id, a.name AS title, n.body AS content, n.author_id, n.created "
        "FROM account_note n JOIN account a ON a.account_id = n.account_id",
        "access": ["group"],
        "acl_query": "SELECT note_id, team FROM note_acl",
        "facet_columns": {"created": "date"},
        "person_facets": ["author_id"],
        "facet_cues": {"author_id": ["author", "authors", "wrote", "written", "autor"]},
        "words": ["nota", "notas"],
    },
}
ACCESS = {
    "see_all_roles": "sales_manager",
    "access_roles_query": "SELECT rep_id, role FROM sales_rep",
    "access_groups_query": "SELECT rep_id, team FROM team_member",
}

DDL = (
    "CREATE TABLE sales_rep (rep_id INTEGER PRIMARY KEY, full_name TEXT NOT NULL, role TEXT NOT NULL)",
    "CREATE TABLE team_member (rep_id INTEGER NOT NULL, team TEXT NOT NULL)",
    "CREATE TABLE deal (deal_id INTEGER PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL, "
    "stage TEXT NOT NULL, amount INTEGER NOT NULL, close_date TEXT NOT NULL, region TEXT NOT NULL, rep_id INTEGER, "
    "team TEXT)",
    "CREATE TABLE account (account_id INTEGER PRIMARY KEY, name TEXT NOT NULL)",
    "CREATE TABLE account_note (note_id INTEGER PRIMARY KEY, account_id INTEGER NOT NULL, author_id INTEGER, "
    "body TEXT NOT NULL, created TEXT NOT NULL)",
    "CREATE TABLE note_acl (note_id INTEGER NOT NULL, team TEXT NOT NULL)",
)


# -- the data ---------------------------------------------------------------------------------
@dataclass
class World:
    deals: list[dict[str, Any]] = field(default_factory=list)
    notes: list[dict[str, Any]] = field(default_factory=list)
    acl: list[tuple[int, str]] = field(default_factory=list)

    @property
    def names(self) -> dict[int, str]:
        return {r[0]: r[1] for r in REPS}

    def teams(self, rep: int) -> set[str]:
        return {t for r in REPS if r[0] == rep for t in r[2]}

    def sees_all(self, rep: int) -> bool:
        return any(r[0] == rep and r[3] == "sales_manager" for r in REPS)

    def visible_deals(self, rep: int) -> list[dict[str, Any]]:
        """The declared policy in plain Python: see-all, the owner, or the deal's team; else hidden."""
        if self.sees_all(rep):
            return list(self.deals)
        return [
            d
            for d in self.deals
            if d["rep_id"] == rep or (d["team"] is not None and d["team"] in self.teams(rep))
        ]

    def visible_notes(self, rep: int) -> list[dict[str, Any]]:
        if self.sees_all(rep):
            return list(self.notes)
        mine = self.teams(rep)
        shared = {n for n, team in self.acl if team in mine}
        return [n for n in self.notes if n["id"] in shared]


def make_world(seed: int = 33) -> World:
    rnd = random.Random(seed)
    sellers = [r for r in REPS if r[3] == "rep"]
    world = World()
    for i in range(1, DEALS + 1):
        roll = rnd.random()
        if roll < 0.06:
            rep, team = None, rnd.choice(TEAMS)
        elif roll < 0.10:
            rep, team = FORMER, rnd.choice(TEAMS)
        else:
            seller = rnd.choice(sellers)
            rep, team = seller[0], rnd.choice(seller[2])
        company, product = rnd.choice(COMPANIES), rnd.choice(PRODUCTS)
        stage = rnd.choices(STAGES, weights=(3, 3, 2, 2, 3, 2))[0]
        close = TODAY + dt.timedelta(days=rnd.randrange(-120, 120))
        world.deals.append(
            {
                "id": i,
                "name": f"{company} {product}",
                "stage": stage,
                "amount": 250 * rnd.randrange(4, 800),
                "close_date": close.isoformat(),
                "region": rnd.choice(REGIONS),
                "rep_id": rep,
                "team": team,
                "description": f"{company} is evaluating the {product}. Next step: "
                f"{rnd.choice(('a demo', 'a pricing call', 'legal review', 'a pilot'))}.",
            }
        )
    for i in range(1, NOTES + 1):
        author = rnd.choice([r[0] for r in REPS[:8]] + [FORMER])
        account = rnd.randrange(1, len(COMPANIES) + 1)
        world.notes.append(
            {
                "id": i,
                "account_id": account,
                "author_id": author,
                "created": (TODAY - dt.timedelta(days=rnd.randrange(0, 90))).isoformat(),
                "body": f"Call with {COMPANIES[account - 1]}: "
                f"{rnd.choice(('budget approved', 'champion left', 'asked for references', 'renewal risk'))}.",
            }
        )
        for team in rnd.sample(TEAMS, rnd.choice((1, 1, 2))):
            world.acl.append((i, team))
    return world


def create(conn: Any, world: World) -> None:
    """The CRM's tables and rows (a SQLAlchemy connection in a transaction)."""
    import sqlalchemy as sa

    for ddl in DDL:
        conn.exec_driver_sql(ddl)
    conn.execute(
        sa.text("INSERT INTO sales_rep VALUES (:i, :n, :r)"),
        [{"i": r[0], "n": r[1], "r": r[3]} for r in REPS],
    )
    conn.execute(
        sa.text("INSERT INTO team_member VALUES (:i, :t)"), [{"i": r[0], "t": t} for r in REPS for t in r[2]]
    )
    conn.execute(
        sa.text(
            "INSERT INTO deal VALUES (:id, :name, :description, :stage, :amount, :close_date, :region, "
            ":rep_id, :team)"
        ),
        world.deals,
    )
    conn.execute(
        sa.text("INSERT INTO account VALUES (:i, :n)"),
        [{"i": i, "n": f"{c} Inc."} for i, c in enumerate(COMPANIES, 1)],
    )
    conn.execute(
        sa.text("INSERT INTO account_note VALUES (:id, :account_id, :author_id, :body, :created)"),
        world.notes,
    )
    conn.execute(sa.text("INSERT INTO note_acl VALUES (:n, :t)"), [{"n": n, "t": t} for n, t in world.acl])


def settings_overrides(*, people: bool = True) -> dict[str, Any]:
    """The deployment's configuration as load_settings overrides."""
    out: dict[str, Any] = {"sources": SOURCES, **ACCESS}
    if people:
        out["people_query"] = PEOPLE_QUERY
    return out


def config_toml(data_dir: Path, *, people: bool = True) -> str:
    """The same deployment as the oracle-rag.toml a user writes."""
    lines = [
        f'data_dir = "{data_dir}"',
        "",
        "[access]",
        f'see_all_roles = ["{ACCESS["see_all_roles"]}"]',
        f'roles_query = "{ACCESS["access_roles_query"]}"',
        f'groups_query = "{ACCESS["access_groups_query"]}"',
    ]
    if people:
        lines += ["", "[people]", f'query = "{PEOPLE_QUERY}"']
    for name, options in SOURCES.items():
        lines += ["", f"[sources.{name}]"]
        lines += [f"{key} = {_toml(value)}" for key, value in options.items()]
    return "\n".join(lines) + "\n"


def _toml(value: Any) -> str:
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + " }"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


# -- questions and their truth ------------------------------------------------------------------
@dataclass
class Question:
    category: str  # person | count | filter | lookup
    who: int
    text: str
    check: Callable[[str, list[str]], str | None]  # (answer, cited anchors) -> None when right, else why
    person: bool = False  # its answer must name people, never their ids


def _person(who: int, text: str, check: Callable[[str, list[str]], str | None]) -> Question:
    """A question whose answer names people (category ``person``): never their ids."""
    return Question("person", who, text, check, person=True)


def first_number(text: str) -> int | None:
    """The count an answer starts with ("No deals you may see match ..." is 0)."""
    if text.startswith("No "):
        return 0
    match = re.match(r"\D*?(\d[\d,]*)", text.split("\n", 1)[0])
    return int(match.group(1).replace(",", "")) if match else None


def fold(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c)).casefold()


def _count(expected: int) -> Callable[[str, list[str]], str | None]:
    def check(answer: str, _cited: list[str]) -> str | None:
        got = first_number(answer)
        return None if got == expected else f"first number {got}, expected {expected}"

    return check


def _most(
    ranking: Counter[Any], names: dict[int, str], what: str, fewest: bool = False
) -> Callable[[str, list[str]], str | None]:
    top = min(ranking.values()) if fewest else max(ranking.values())
    leaders = sorted(names.get(k, str(k)) for k, n in ranking.items() if n == top)

    def check(answer: str, _cited: list[str]) -> str | None:
        head = answer.split("\n", 1)[0]
        if not any(head.startswith(name) for name in leaders) or f": {top}" not in head:
            return f"expected {' or '.join(leaders)} with {top} {what}, got {head!r}"
        return None

    return check


def _groups(ranking: Counter[Any], names: dict[int, str]) -> Callable[[str, list[str]], str | None]:
    lines = {f"{names.get(k, str(k)) if k is not None else 'unassigned'}: {n}" for k, n in ranking.items()}

    def check(answer: str, _cited: list[str]) -> str | None:
        shown = set(answer.splitlines())
        missing = sorted(line for line in lines if line not in shown)
        return None if not missing else f"missing group lines {missing}"

    return check


def _listed(expected: set[int], anchor: str, limit: int = 20) -> Callable[[str, list[str]], str | None]:
    def check(answer: str, cited: list[str]) -> str | None:
        got = first_number(answer)
        if got != len(expected):
            return f"first number {got}, expected {len(expected)}"
        ids = {int(a.split("#")[1].rstrip("]")) for a in cited if a.startswith(f"[{anchor} #")}
        if not ids <= expected or len(ids) != min(limit, len(expected)):
            return f"cited {sorted(ids - expected)} not expected, or {len(ids)} cited of {len(expected)}"
        return None

    return check


def _lookup(deal: dict[str, Any] | None, name: str | None) -> Callable[[str, list[str]], str | None]:
    def check(answer: str, cited: list[str]) -> str | None:
        if deal is None:
            return None if not cited else f"cited {cited} for a deal the caller may not see"
        if cited[:1] != [f"[DEALS #{deal['id']}]"]:
            return f"first citation {cited[:1]}"
        if name is not None and name not in answer:
            return f"the rep's name {name!r} is not shown"
        return None

    return check


def questions(world: World) -> list[Question]:
    names = world.names
    out: list[Question] = []
    askers = (9101, 9107, 9109)  # a rep (north), a rep in two teams, a manager (everything)
    for who in askers:
        deals = world.visible_deals(who)
        open_deals = [d for d in deals if d["stage"] not in DONE]
        by_rep_open = Counter(d["rep_id"] for d in open_deals if d["rep_id"] is not None)
        by_rep = Counter(d["rep_id"] for d in deals)
        out.append(_person(who, "who has the most open deals?", _most(by_rep_open, names, "open deals")))
        out.append(_person(who, "open deals per rep", _groups(by_rep_open, names)))
        out.append(_person(who, "how many deals per seller?", _groups(by_rep, names)))
        seen_reps = sorted({d["rep_id"] for d in deals if d["rep_id"] in names})
        for rep in seen_reps[:4]:
            name = names[rep]
            theirs = [d for d in deals if d["rep_id"] == rep]
            still_open = [d for d in theirs if d["stage"] not in DONE]
            out.append(_person(who, f"deals of {name}", _listed({d["id"] for d in theirs}, "DEALS")))
            out.append(
                _person(
                    who,
                    f"open deals of {fold(name).title()}",  # no accents typed
                    _listed({d["id"] for d in still_open}, "DEALS"),
                )
            )
            out.append(
                _person(
                    who,
                    f"how many won deals does {name} have?",
                    _count(sum(d["stage"] == "WON" for d in theirs)),
                )
            )
        mine_open = [d for d in open_deals if d["rep_id"] == who]
        out.append(_person(who, "my open deals", _listed({d["id"] for d in mine_open}, "DEALS")))
        out.append(Question("count", who, "how many deals are open?", _count(len(open_deals))))
        out.append(
            Question(
                "count", who, "how many deals were lost?", _count(sum(d["stage"] == "LOST" for d in deals))
            )
        )
        out.append(
            Question(
                "count",
                who,
                "how many deals are in negotiation in EMEA?",
                _count(sum(d["stage"] == "NEGOTIATION" and d["region"] == "EMEA" for d in deals)),
            )
        )
        out.append(
            Question(
                "count", who, "¿cuántos tratos ganados hay?", _count(sum(d["stage"] == "WON" for d in deals))
            )
        )
        out.append(
            Question(
                "filter",
                who,
                "unassigned deals",
                _listed({d["id"] for d in deals if d["rep_id"] is None}, "DEALS"),
            )
        )
        out.append(
            Question(
                "filter",
                who,
                "won deals in APAC",
                _listed({d["id"] for d in deals if d["stage"] == "WON" and d["region"] == "APAC"}, "DEALS"),
            )
        )
        visible = {d["id"] for d in deals}
        for deal_id in (7, 123, 388):
            deal = next(d for d in world.deals if d["id"] == deal_id)
            shown = deal if deal_id in visible else None
            out.append(
                Question(
                    "lookup",
                    who,
                    f"deal {deal_id}",
                    _lookup(shown, names.get(deal["rep_id"] or 0)),
                    person=shown is not None and deal["rep_id"] in names,
                )
            )
        notes = world.visible_notes(who)
        by_author = Counter(n["author_id"] for n in notes)
        out.append(_person(who, "who wrote the most notes?", _most(by_author, names, "notes")))
        author = min(a for a in by_author if a in names)
        out.append(
            _person(
                who,
                f"notes by {names[author]}",
                _listed({n["id"] for n in notes if n["author_id"] == author}, "NOTES"),
            )
        )
        out.append(Question("count", who, "how many notes?", _count(len(notes))))
    # typos and Spanish, asked by the manager (who sees every deal)
    deals = world.deals
    herrera = [d for d in deals if d["rep_id"] == 9101]
    out.append(_person(9109, "deals of Tomás Herera", _listed({d["id"] for d in herrera}, "DEALS")))
    out.append(_person(9109, "deals of tomas herrera", _listed({d["id"] for d in herrera}, "DEALS")))
    out.append(
        _person(
            9109,
            "¿cuántos tratos abiertos tiene Ana Pérez?",
            _count(sum(d["rep_id"] == 9102 and d["stage"] not in DONE for d in deals)),
        )
    )
    out.append(
        _person(9109, "deals of Okafor", _listed({d["id"] for d in deals if d["rep_id"] == 9105}, "DEALS"))
    )
    out.append(
        _person(
            9109,
            "who has the fewest open deals?",
            _most(
                Counter(d["rep_id"] for d in deals if d["stage"] not in DONE and d["rep_id"] is not None),
                names,
                "open deals",
                fewest=True,
            ),
        )
    )
    out.append(
        _person(9109, "deals of Zoe", _listed({d["id"] for d in deals if d["rep_id"] == 9105}, "DEALS"))
    )
    out.append(
        _person(
            9109,
            "Bjorn's open deals",
            _listed({d["id"] for d in deals if d["rep_id"] == 9106 and d["stage"] not in DONE}, "DEALS"),
        )
    )
    out.append(
        Question(
            "filter",
            9109,
            "open deals closing before 2026-04-01",
            _listed(
                {d["id"] for d in deals if d["stage"] not in DONE and d["close_date"] < "2026-04-01"}, "DEALS"
            ),
        )
    )
    out.append(
        Question(
            "count",
            9109,
            "how many deals have an amount over 150000?",
            _count(sum(d["amount"] > 150000 for d in deals)),
        )
    )
    # the rep who left has no name: shown as the id, the others by name
    out.append(_person(9109, "deals per rep", _groups(Counter(d["rep_id"] for d in deals), names)))
    return out


# -- asking -------------------------------------------------------------------------------------
def ids_shown(answer: str, names: dict[int, str]) -> list[int]:
    """Named reps' ids that appear in an answer as a number of their own."""
    return [rep for rep in names if re.search(rf"(?<![\d#]){rep}(?!\d)", answer)]


def ask_all(rag: Any, world: World) -> list[dict[str, Any]]:
    """Ask every question (no model: the structured or extractive answer) and score it."""
    from oracle_rag.answering.chat import Chat
    from oracle_rag.callers.access import load_caller

    chat = Chat(rag, None, today=lambda: TODAY)
    out = []
    for q in questions(world):
        with rag.engine.connect() as conn:
            caller = load_caller(conn, q.who, rag.engine)
        answer = chat.answer(q.text, caller, store=False)
        cited = [c.anchor for c in answer.citations] or re.findall(r"\[[A-Z]+ #\d+\]", answer.answer)
        problem = q.check(answer.answer, cited)
        shown = ids_shown(answer.answer, world.names)
        out.append(
            {
                "category": q.category,
                "who": q.who,
                "question": q.text,
                "person": q.person,
                "right": problem is None,
                "problem": problem,
                "ids_shown": shown,
                "answer": answer.answer,
            }
        )
    return out


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    by: dict[str, list[bool]] = {}
    for r in rows:
        by.setdefault(r["category"], []).append(r["right"])
    person = [r for r in rows if r["person"]]
    return {
        "questions": len(rows),
        "right": round(sum(r["right"] for r in rows) / len(rows), 3),
        "by_category": {k: round(sum(v) / len(v), 3) for k, v in sorted(by.items())},
        "person_questions": len(person),
        "person_answers_naming_people": round(
            sum(r["right"] and not r["ids_shown"] for r in person) / max(1, len(person)), 3
        ),
        "answers_showing_a_named_id": sum(bool(r["ids_shown"]) for r in rows),
    }


def build(data_dir: Path, *, people: bool = True, world: World | None = None) -> tuple[Any, World]:
    """A migrated, filled and indexed deployment in ``data_dir`` (its model file must be there or buildable)."""
    from oracle_rag.config import load_settings
    from oracle_rag.system import RagSystem

    world = world or make_world()
    rag = RagSystem(load_settings(env={}, data_dir=str(data_dir), **settings_overrides(people=people)))
    rag.migrate()
    with rag.engine.begin() as conn:
        create(conn, world)
    results = rag.sql_sources().sync()
    bad = [r.summary() for r in results if r.outcome != "changed"]
    if bad:
        raise RuntimeError(f"sources did not load: {bad}")
    return rag, world


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--show", action="store_true", help="print every wrong answer")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    started = time.time()
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="oracle-rag-bench-crm-") as tmp:
        from oracle_rag.embedding import ensure_model

        model = ensure_model(Path(tmp) / "model")
        for label, people in (("baseline_without_people", False), ("with_people", True)):
            data = Path(tmp) / label
            (data / "models").mkdir(parents=True)
            for part in model.parent.iterdir():  # the model and its batched companions, built once
                os.link(part, data / "models" / part.name)
            rag, world = build(data, people=people)
            try:
                rows = ask_all(rag, world)
            finally:
                rag.close()
            result[label] = summary(rows)
            result[label]["wrong"] = [r for r in rows if not r["right"] or r["ids_shown"]]
    base, new = result["baseline_without_people"], result["with_people"]
    result["ratio_right_with_people_to_baseline"] = round(new["right"] / max(base["right"], 1e-9), 3)
    result["machine"] = {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "total_run_s": round(time.time() - started, 1),
    }
    for label in ("baseline_without_people", "with_people"):
        s = result[label]
        print(
            f"{label}: {s['questions']} questions, right {s['right']:.3f} {s['by_category']}; person answers "
            f"naming people {s['person_answers_naming_people']:.3f}; answers showing a named id "
            f"{s['answers_showing_a_named_id']}"
        )
        if args.show:
            for r in s["wrong"]:
                print(
                    f"  - [{r['who']}] {r['question']}: {r['problem']} ids={r['ids_shown']}\n    {r['answer'][:200]!r}"
                )
    print(f"right with [people] / without: {result['ratio_right_with_people_to_baseline']}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
