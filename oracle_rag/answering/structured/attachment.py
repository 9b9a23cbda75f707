"""Whether a facet word describes the records a question asks about, or is part of its topic.

"blocked tasks", "tickets that are still pending", "what is blocked in sprint
7": the word qualifies the records asked for, so it is a filter. "what is
blocking the SSO upgrade", "why is the SSO upgrade blocked", "who said it was
critical", "dar de baja un usuario": it is part of what the question is about,
so it stays in the topic that ranks the records.

The parser gives each word a role (:class:`Role`) and this module reads the
facet word's place among them, the way a reader parses a noun phrase:

* **attached to a topic word**: the facet word sits right before a run of
  topic words (determiners between: "blocking *the SSO upgrade*", "pending
  *refund*") whose phrase does not end on a record word ("blocked *login*
  tasks" does: the records are qualified), or right after one ("the SSO
  *upgrade* blocked", "*dar* de baja", "el *reembolso* pendiente"), walking
  back over topic words, determiners and linking words to see whether the
  phrase starts with a record word ("tareas de login bloqueadas") or is the
  subject of a question about the records ("what did *the team* finish");
* otherwise it is a predicate or a modifier in the record phrase when, going
  left or right over filler, copulas and other values, one reaches the records
  asked about first: a record word ("tasks", "sprint"), the question word that
  stands for them ("what", "qué"), "how many" or "my" — through a topic only
  when the record word links to it ("tasks *about* the SSO upgrade are
  blocked"). With no such anchor, it describes the records unless a topic word
  stands next to it on some side ("who said it was critical").

A value named next to its facet's cue ("state pending", "severidad alta") is
always a filter; the parser checks that before asking here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class Role(StrEnum):
    """A word's role in the question, as far as attachment needs it."""

    RECORD = "record"  # a word naming a record type ("tasks", "tickets", "sprint")
    ANCHOR = "anchor"  # stands for the records asked about: "what", "which", "how many", "my"
    TOPIC = "topic"  # a content word nothing else claimed ("SSO", "upgrade", "refund", "said")
    DETERMINER = "determiner"  # "the", "a", "el", "un", "our"
    LINK = "link"  # links a record word to its topic: "about", "on", "sobre", "de"
    AUXILIARY = "auxiliary"  # "did", "does", "has": "what did the team finish" (its subject, then the verb)
    VALUE = "value"  # another facet value, a name, a date, an id, a cue
    FILLER = "filler"  # copulas, auxiliaries, negation, other function words


@dataclass(frozen=True)
class Attachment:
    """What a facet word describes: ``records`` (a filter) or not (a topic word); ``anchor``: the index of
    the word standing for the records it reached, when it reached one."""

    records: bool
    anchor: int | None = None


def attach(roles: Sequence[Role], start: int, end: int) -> Attachment:
    """Where the facet word spanning ``roles[start:end]`` attaches (see the module docstring)."""
    if _topic_on_right(roles, end):
        return Attachment(False)
    before = _phrase_before(roles, start)
    if before is not None:
        return Attachment(before[0] == "anchor", before[1])
    left, left_at = _walk(roles, start - 1, -1)
    right, right_at = _walk(roles, end, 1)
    if left == "anchor":
        return Attachment(True, left_at)
    if right == "anchor":
        return Attachment(True, right_at)
    return Attachment("topic" not in (left, right))


def _topic_on_right(roles: Sequence[Role], end: int) -> bool:
    """ "blocking the SSO upgrade": a phrase of topic words after it (past determiners; values and names
    may be part of it: "the *SSO* upgrade") not ending on a record word ("blocked *login* tasks": the
    records qualified), unless a determiner opens it: then it is the facet word's object ("what is
    blocking *the password reset work*"), named by the thing asked about, not by the records' state."""
    j = end
    while j < len(roles) and roles[j] is Role.DETERMINER:
        j += 1
    determined = j > end
    topic = False
    while j < len(roles) and roles[j] in (Role.TOPIC, Role.VALUE):
        topic = topic or roles[j] is Role.TOPIC
        j += 1
    return topic and (determined or not (j < len(roles) and roles[j] is Role.RECORD))


def topic_records(roles: Sequence[Role]) -> list[Role]:
    """``roles`` with a record word that only names what a topic phrase is about ("the SLA timer *for
    tickets* on hold", "notices *for tickets*") read as a topic word: it is not the records asked for."""
    out = list(roles)
    for i, role in enumerate(roles):
        if role is not Role.RECORD:
            continue
        j = i - 1
        while j >= 0 and roles[j] is Role.DETERMINER:
            j -= 1
        if j >= 1 and roles[j] is Role.LINK and roles[j - 1] is Role.TOPIC:
            out[i] = Role.TOPIC
    return out


def _phrase_before(roles: Sequence[Role], start: int) -> tuple[str, int | None] | None:
    """The phrase of topic words right before it (or before one linking word), if any: ("topic", None)
    when it is what the facet word describes ("the SSO upgrade blocked", "dar de baja"); ("anchor", where)
    when the phrase starts with a record word ("tareas de login bloqueadas") or is the subject of a verb
    whose object is the records asked for ("what did the team finish")."""
    i = start - 1
    if i >= 1 and roles[i] is Role.LINK and roles[i - 1] is Role.TOPIC:
        i -= 1
    if i < 0 or roles[i] is not Role.TOPIC:
        return None
    while i >= 0 and roles[i] in (Role.TOPIC, Role.LINK, Role.DETERMINER):
        i -= 1
    if i >= 0 and roles[i] is Role.RECORD:
        return "anchor", i
    if i >= 0 and roles[i] is Role.AUXILIARY:
        i -= 1
        while i >= 0 and roles[i] in (Role.FILLER, Role.VALUE, Role.DETERMINER):
            i -= 1
        if i >= 0 and roles[i] in (Role.ANCHOR, Role.RECORD):
            return "anchor", i
    return "topic", None


def _walk(roles: Sequence[Role], i: int, step: int) -> tuple[str, int | None]:
    """From ``i`` in direction ``step`` over filler and values: ("anchor", where) at a record word or an
    anchor, ("topic", None) at a topic word that no record word links to, ("edge", None) at the end."""
    while 0 <= i < len(roles):
        role = roles[i]
        if role in (Role.RECORD, Role.ANCHOR):
            return "anchor", i
        if role is Role.TOPIC:
            linked = _linked_record(roles, i, step)
            return ("anchor", linked) if linked is not None else ("topic", None)
        i += step
    return "edge", None


def _linked_record(roles: Sequence[Role], i: int, step: int) -> int | None:
    """The record word a topic phrase belongs to, looking away from the facet word: the head its topic
    words modify ("blocked *login* tasks"), or the record word it is linked to ("tasks *about* the SSO
    upgrade are blocked": over the phrase's topic words and determiners, a linking word, the record)."""
    while 0 <= i < len(roles) and roles[i] in (Role.TOPIC, Role.DETERMINER):
        i += step
    if step == 1 and i < len(roles) and roles[i] is Role.RECORD:
        return i
    if not (0 <= i < len(roles)) or roles[i] is not Role.LINK:
        return None
    i += step
    while 0 <= i < len(roles) and roles[i] in (Role.DETERMINER, Role.VALUE):
        i += step
    return i if 0 <= i < len(roles) and roles[i] is Role.RECORD else None
