"""``oracle-rag feedback list|export``: ratings of answers read back.

``export`` writes a question set in the format ``bench/qa.py`` reads (``{"about", "questions": [...]}``,
each with id, category, lang, as, question, truth), so use becomes a regression set. The truth of
``bench/qa.py`` is SQL over the reference tables, which a rating cannot supply: every exported item
has ``"truth": null`` and ``"needs_truth": true`` (bench/qa.py skips those until a person writes the
truth), and carries the answer given, the rating, the comment and the guarded SQL as material for it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from oracle_rag.answering.aggregate.examples import list_examples, set_approval
from oracle_rag.answering.chat.feedback import RATINGS, Feedback, FeedbackStore
from oracle_rag.cli.context import pass_system
from oracle_rag.system import RagSystem

# what was understood -> bench/qa.py's category
CATEGORY = {"lookup": "lookup", "list": "filter", "count": "count"}


@click.group("feedback")
def feedback() -> None:
    """Ratings of answers (thumbs up/down on the page, POST /api/feedback)."""


def _read(rag: RagSystem, since: str | None, rating: str | None) -> list[Feedback]:
    return FeedbackStore(rag.engine).list(since=since, rating=RATINGS[rating] if rating else None)


_SINCE = click.option(
    "--since", default=None, help="Only ratings at or after this UTC date (YYYY-MM-DD[THH:MM:SS])."
)
_RATING = click.option(
    "--rating", type=click.Choice(sorted(RATINGS)), default=None, help="Only up or only down."
)


@feedback.command("list")
@_SINCE
@_RATING
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")
@pass_system
def list_cmd(rag: RagSystem, since: str | None, rating: str | None, as_json: bool) -> None:
    """The ratings, oldest first: when, who, up/down, the question and the comment."""
    for item in _read(rag, since, rating):
        if as_json:
            click.echo(json.dumps(item.to_dict(), ensure_ascii=False))
            continue
        d = item.to_dict()
        click.echo(
            f"{d['created_at']}  #{item.message_id}  caller {item.caller_id}  {d['rating']:<4}  "
            f"{(item.question or '').strip()[:80]}" + (f"  -- {item.comment}" if item.comment else "")
        )


def question_item(item: Feedback) -> dict[str, Any]:
    """One ``bench/qa.py`` question for a rating, marked as needing its truth."""
    understood = item.understood or {}
    return {
        "id": f"fb{item.feedback_id}",
        "category": CATEGORY.get(understood.get("kind", ""), "topic"),
        "lang": understood.get("language", "en"),
        "as": item.caller_id,
        "question": item.question or "",
        "truth": None,
        "needs_truth": True,
        "rating": "up" if item.rating > 0 else "down",
        "comment": item.comment,
        "answer_given": item.answer,
        "understood": item.understood or None,
        "guarded_sql": item.guarded_sql,
    }


@feedback.command("export")
@click.option(
    "--out",
    "out",
    type=click.Path(dir_okay=False, writable=True),
    required=True,
    help="The question set file to write (JSON, bench/qa.py format).",
)
@_SINCE
@_RATING
@pass_system
def export(rag: RagSystem, out: str, since: str | None, rating: str | None) -> None:
    """Write the rated questions as a bench/qa.py question set, each marked as needing its truth."""
    questions = [question_item(i) for i in _read(rag, since, rating) if i.question]
    about = (
        "oracle-rag feedback export: rated answers as bench/qa.py questions. truth is null and needs_truth "
        "is true until a person writes the truth SQL (bench/qa.py skips such items); answer_given, rating, "
        "comment and guarded_sql are material for it."
    )
    Path(out).write_text(
        json.dumps({"about": about, "questions": questions}, ensure_ascii=False, indent=1) + "\n",
        encoding="utf-8",
    )
    click.echo(f"wrote {len(questions)} question(s) to {out}")


@feedback.command("examples")
@click.option("--pending", is_flag=True, help="Only the examples not approved yet (the candidates).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per line.")
@pass_system
def examples_cmd(rag: RagSystem, pending: bool, as_json: bool) -> None:
    """Question -> SQL examples from answers rated up, with literals as placeholders, oldest first.

    An example is offered to the caller who rated it; `feedback approve ID` offers it to everyone.
    """
    for item in list_examples(rag.engine):
        if pending and item.approved_at is not None:
            continue
        if as_json:
            click.echo(json.dumps(item.to_dict(), ensure_ascii=False))
            continue
        state = "approved" if item.approved_at else "pending "
        click.echo(
            f"{item.feedback_id}  {state}  caller {item.caller_id}  Q: {item.question[:80]}\n"
            f"    SQL: {item.sql}"
        )


@feedback.command("approve")
@click.argument("feedback_id", type=click.IntRange(1))
@click.option(
    "--withdraw", is_flag=True, help="Withdraw the approval: offer the example to its own caller only."
)
@pass_system
def approve(rag: RagSystem, feedback_id: int, withdraw: bool) -> None:
    """Offer the example of rating ID (see `feedback examples`) to every caller, or withdraw that."""
    set_approval(rag.engine, feedback_id, not withdraw)
    click.echo(
        f"example {feedback_id} "
        + ("offered to its own caller only" if withdraw else "approved for every caller")
    )
