"""``oracle-rag llm check``: what model is plugged in, how fast it is, and whether it follows the
answer format.

A user who sets ``llm_url`` cannot otherwise tell a model that answers in 2 s
from one that needs 2 minutes on CPU, or one that restates counts and invents
anchors from one that cites what it is given. The check asks the configured
endpoint one short structured question (fixed facts about two records, given
exactly as answers give them), times it, and runs the reply through the same
sentence checking answers use (:mod:`oracle_rag.answering.chat.checking`).
"""

from __future__ import annotations

import json
import time

import click

from oracle_rag.answering.chat.checking import check_text, evidence_from
from oracle_rag.answering.chat.llm import LLMClient
from oracle_rag.answering.chat.prompt import build_structured_messages
from oracle_rag.cli.context import cli_settings
from oracle_rag.errors import ConfigurationError

RECORDS = [
    {
        "id": "TASK #101",
        "title": "Rotate the payment gateway keys",
        "status": "BLOCKED",
        "priority": "HIGH",
        "text": "Blocked until the security team issues the new certificate.",
    },
    {
        "id": "TASK #102",
        "title": "Export invoices to CSV",
        "status": "BLOCKED",
        "priority": "LOW",
        "text": "Waiting for the finance team to confirm the column order.",
    },
]
FACTS = {
    "summary": "2 tasks match status: BLOCKED:",
    "kind": "list",
    "total": 2,
    "records": RECORDS,
}
QUESTION = "Which tasks are blocked, and why?"


@click.group("llm")
def llm() -> None:
    """The configured language model."""


@llm.command("check")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.pass_context
def check(ctx: click.Context, as_json: bool) -> None:
    """Ask the configured endpoint one short question: model name, tokens/s, answer format."""
    settings = cli_settings(ctx)
    if not settings.llm_url:
        raise ConfigurationError(
            "llm_url: not set (set ORACLE_RAG_LLM_URL and ORACLE_RAG_LLM_MODEL, see README)", key="llm_url"
        )
    client = LLMClient(settings)
    messages = build_structured_messages(QUESTION, json.dumps(FACTS, indent=1))
    started = time.monotonic()
    pieces: list[str] = []
    first = None
    for piece in client.stream(messages):
        first = first if first is not None else time.monotonic() - started
        pieces.append(piece)
    seconds = time.monotonic() - started
    text = "".join(pieces)
    generating = seconds - (first or 0.0)
    counted = len(pieces)  # OpenAI-compatible servers stream about one token per piece
    rate = round(counted / generating, 2) if generating > 0 else None
    records = {
        ("TASK", r["id"].split("#")[1]): ({"status": r["status"], "priority": r["priority"]}, r["title"])
        for r in RECORDS
    }
    evidence = evidence_from([json.dumps(FACTS)], counts=[2], records=records)
    kept, tally = check_text(text, evidence)
    follows = tally.sentences > 0 and tally.removed == 0 and "[TASK #10" in kept
    result = {
        "model": client.model,
        "seconds": round(seconds, 2),
        "first_token_s": round(first or 0.0, 2),
        "tokens": counted,
        "tokens_per_s": rate,
        "follows_format": follows,
        "sentences": tally.sentences,
        "removed": tally.removed,
        "timeout_s": settings.llm_timeout_s,
        "answer": text,
    }
    if as_json:
        click.echo(json.dumps(result, ensure_ascii=False))
        return
    click.echo(f"model: {client.model}")
    click.echo(
        f"answered in {seconds:.1f} s (first token after {first or 0.0:.1f} s: reading the prompt), "
        f"{counted} tokens at {rate} tokens/s; llm_timeout_s is {settings.llm_timeout_s:g} s"
    )
    if seconds > settings.llm_timeout_s / 2:
        click.echo(
            "warning: this short answer took more than half of llm_timeout_s; raise it "
            "(ORACLE_RAG_LLM_TIMEOUT_S) or use a faster model"
        )
    if follows:
        click.echo(
            "answer format: follows it (cites the records it was given, states no number it was not given)"
        )
    else:
        why = (
            ", ".join(f"{n} {r}" for r, n in sorted(tally.reasons.items())) or "no citation of a given record"
        )
        click.echo(
            f"answer format: does not follow it ({tally.removed} of {tally.sentences} sentences would be "
            f"removed: {why}); answers still show the computed part, the model adds less"
        )
    click.echo("answer: " + " ".join(text.split()))
