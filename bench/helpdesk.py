"""The help-desk corpus of ``bench/data/helpdesk``: hand-written tickets, comment threads and articles.

The corpus is text (``tickets_*.txt``, ``articles.txt``, ``people.json``) so that it reads like
what it is and diffs well. This module parses it, creates the help desk's own tables (``person``,
``ticket``, ``ticket_comment``, ``kb_article``) in the product's database and fills them, and
loads the settings a user would write (``oracle-rag.toml`` there: the SQL sources and the access
declaration). Nothing of the reference application is involved: the database is migrated
without the demo tables.

Used by ``bench/qa_open.py`` and by tests that need a realistic corpus.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa

DATA = Path(__file__).resolve().parent / "data" / "helpdesk"
CONFIG = DATA / "oracle-rag.toml"

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS person (person_id INTEGER PRIMARY KEY, name TEXT NOT NULL, kind TEXT NOT NULL, "
    "role TEXT, team TEXT, email TEXT, company TEXT)",
    "CREATE TABLE IF NOT EXISTS ticket (ticket_id INTEGER PRIMARY KEY, subject TEXT NOT NULL, body TEXT NOT NULL, "
    "status TEXT NOT NULL, priority TEXT NOT NULL, product TEXT NOT NULL, team TEXT NOT NULL, lang TEXT NOT NULL, "
    "opened_on TEXT NOT NULL, requester_id INTEGER NOT NULL REFERENCES person, assignee_id INTEGER REFERENCES person)",
    "CREATE TABLE IF NOT EXISTS ticket_comment (comment_id INTEGER PRIMARY KEY, "
    "ticket_id INTEGER NOT NULL REFERENCES ticket, author_id INTEGER NOT NULL REFERENCES person, "
    "created_on TEXT NOT NULL, body TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS kb_article (article_id INTEGER PRIMARY KEY, title TEXT NOT NULL, body TEXT NOT NULL, "
    "product TEXT NOT NULL, lang TEXT NOT NULL, author_id INTEGER NOT NULL REFERENCES person, "
    "updated_on TEXT NOT NULL)",
)
TABLES = ("ticket_comment", "ticket", "kb_article", "person")


@dataclass
class Entry:
    """One ticket or article as written: its header fields, its text and its comments (author, date, text)."""

    kind: str
    number: int
    fields: dict[str, str]
    text: str
    comments: list[tuple[str, str, str]] = field(default_factory=list)


_START = re.compile(r"^=== (ticket|article) (\d+)\s*$")
_COMMENT = re.compile(r"^--- (.+), (\d{4}-\d{2}-\d{2})\s*$")
_FIELD = re.compile(r"^([a-z_]+): ?(.*)$")


def parse(text: str) -> list[Entry]:
    """Entries of one corpus file (format in its header comment); a malformed line raises ValueError."""
    entries: list[Entry] = []
    part = ""  # "head", "text", "comment"
    lines: list[str] = []

    def flush() -> None:
        if not entries or not lines:
            return
        body = "\n".join(lines).strip()
        if part == "comment":
            author, day, _ = entries[-1].comments[-1]
            entries[-1].comments[-1] = (author, day, " ".join(body.split()))
        else:
            entries[-1].text = "\n\n".join(" ".join(p.split()) for p in body.split("\n\n") if p.strip())
        lines.clear()

    for number, line in enumerate(text.split("\n"), 1):
        if not entries and line.startswith("#"):  # the file's header comment
            continue
        start = _START.match(line)
        if start:
            flush()
            entries.append(Entry(start.group(1), int(start.group(2)), {}, ""))
            part = "head"
            continue
        if not entries:
            if line.strip():
                raise ValueError(f"line {number}: text before the first entry")
            continue
        if part == "head":
            if not line.strip():
                part = "text"
                continue
            m = _FIELD.match(line)
            if not m:
                raise ValueError(
                    f"line {number}: expected 'key: value' in the header of {entries[-1].number}"
                )
            entries[-1].fields[m.group(1)] = m.group(2).strip()
            continue
        comment = _COMMENT.match(line)
        if comment:
            flush()
            entries[-1].comments.append((comment.group(1).strip(), comment.group(2), ""))
            part = "comment"
            continue
        lines.append(line)
    flush()
    return entries


def people() -> list[dict[str, Any]]:
    return list(json.loads((DATA / "people.json").read_text(encoding="utf-8"))["people"])


def tickets() -> list[Entry]:
    out = [e for path in sorted(DATA.glob("tickets_*.txt")) for e in parse(path.read_text(encoding="utf-8"))]
    return sorted(out, key=lambda e: e.number)


def articles() -> list[Entry]:
    return parse((DATA / "articles.txt").read_text(encoding="utf-8"))


def rows() -> dict[str, list[dict[str, Any]]]:
    """The four tables' rows; names in tickets and articles must be people of people.json."""
    folks = people()
    by_name = {p["name"]: p["id"] for p in folks}

    def who(name: str, where: str) -> int | None:
        if not name:
            return None
        if name not in by_name:
            raise ValueError(f"{where}: {name!r} is not in people.json")
        return int(by_name[name])

    out: dict[str, list[dict[str, Any]]] = {
        "person": [
            {
                "person_id": p["id"],
                "name": p["name"],
                "kind": p["kind"],
                "role": p.get("role"),
                "team": p.get("team"),
                "email": p.get("email"),
                "company": p.get("company"),
            }
            for p in folks
        ],
        "ticket": [],
        "ticket_comment": [],
        "kb_article": [],
    }
    comment_id = 0
    for t in tickets():
        f = t.fields
        where = f"ticket {t.number}"
        out["ticket"].append(
            {
                "ticket_id": t.number,
                "subject": f["subject"],
                "body": t.text,
                "status": f["status"],
                "priority": f["priority"],
                "product": f["product"],
                "team": f["team"],
                "lang": f["lang"],
                "opened_on": f["opened"],
                "requester_id": who(f["requester"], where),
                "assignee_id": who(f.get("assignee", ""), where),
            }
        )
        for author, day, body in t.comments:
            comment_id += 1
            out["ticket_comment"].append(
                {
                    "comment_id": comment_id,
                    "ticket_id": t.number,
                    "author_id": who(author, where),
                    "created_on": day,
                    "body": body,
                }
            )
    for a in articles():
        f = a.fields
        out["kb_article"].append(
            {
                "article_id": a.number,
                "title": f["title"],
                "body": a.text,
                "product": f["product"],
                "lang": f["lang"],
                "author_id": who(f["author"], f"article {a.number}"),
                "updated_on": f["updated"],
            }
        )
    return out


def create(conn: sa.Connection) -> bool:
    """Create and fill the help desk's tables unless they hold this corpus already; True when (re)filled."""
    for statement in SCHEMA:
        conn.execute(sa.text(statement))
    data = rows()
    have = {t: conn.execute(sa.text(f"SELECT COUNT(*) FROM {t}")).scalar_one() for t in TABLES}
    if all(have[t] == len(data[t]) for t in TABLES):
        return False
    for table in TABLES:
        conn.execute(sa.text(f"DELETE FROM {table}"))
    for table in reversed(TABLES):
        columns = list(data[table][0])
        conn.execute(
            sa.text(
                f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join(':' + c for c in columns)})"
            ),
            data[table],
        )
    return True


def shape() -> dict[str, Any]:
    """What the corpus holds: counts per kind and language, comments, words."""
    ts, arts = tickets(), articles()
    return {
        "tickets": len(ts),
        "tickets_es": sum(t.fields["lang"] == "es" for t in ts),
        "comments": sum(len(t.comments) for t in ts),
        "tickets_with_comments": sum(bool(t.comments) for t in ts),
        "articles": len(arts),
        "articles_es": sum(a.fields["lang"] == "es" for a in arts),
        "words": sum(
            len((t.fields["subject"] + " " + t.text + " " + " ".join(c[2] for c in t.comments)).split())
            for t in ts
        )
        + sum(len((a.fields["title"] + " " + a.text).split()) for a in arts),
    }
