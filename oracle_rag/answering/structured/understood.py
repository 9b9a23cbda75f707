"""What a question was understood as: conditions, notices, the types it is about.

Kept apart from the parser (``understanding``) so the target resolution
(``targets``) and the renderers can use these types without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from oracle_rag.answering.structured.catalog import say


@dataclass(frozen=True)
class Condition:
    """One predicate on a facet. ``op``: in, not_in, null, lt (dates), range (dates, inclusive)."""

    facet: str
    op: str
    values: tuple[Any, ...]
    key: str  # conditions sharing a key are one chip ("overdue" = due before today + not done)
    text: str  # the words of the question it came from

    def to_dict(self) -> dict[str, Any]:
        return {
            "facet": self.facet,
            "op": self.op,
            "values": list(self.values),
            "key": self.key,
            "text": self.text,
        }


@dataclass(frozen=True)
class Notice:
    """A value the question named that the data does not have."""

    facet: str
    text: str
    suggestion: str | None

    def message(self, label: str, lang: str = "en") -> str:
        named = say(lang, "no_such", label=label, text=self.text)
        return (
            say(lang, "did_you_mean", named=named, suggestion=self.suggestion) if self.suggestion else named
        )

    def to_dict(self, label: str, lang: str = "en") -> dict[str, Any]:
        return {
            "facet": self.facet,
            "text": self.text,
            "suggestion": self.suggestion,
            "message": self.message(label, lang),
        }


class AnswerKind(StrEnum):
    """How a question is answered: said (notice), read (lookup), counted, listed, or searched (topic)."""

    NOTICE = "notice"  # a value the data does not have, or words that apply to nothing asked about
    LOOKUP = "lookup"  # records named by their ids
    COUNT = "count"
    LIST = "list"
    TOPIC = "topic"  # nothing exact to compute: retrieval answers


@dataclass
class Understanding:
    question: str
    language: str = "en"
    lookups: list[tuple[str, str]] = field(default_factory=list)  # (source type, stored SOURCE_ID)
    lookup_groups: list[int] = field(default_factory=list)  # per lookup: which id of the question it reads
    conditions: list[Condition] = field(default_factory=list)  # of the first target type
    target_type: str | None = None
    targets: list[str] = field(default_factory=list)  # every type answered (several: each is said)
    per_type: dict[str, list[Condition]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # understood but not applied, or which date was used
    read_as: list[str] = field(default_factory=list)  # words read with a typo corrected
    advice: bool = False  # "what should I work on next?": nothing in the data says what comes next
    count: bool = False
    group_by: str | None = None
    superlative: str | None = None  # "most" | "fewest"
    topic: str = ""
    notices: list[Notice] = field(default_factory=list)
    dropped: tuple[str, ...] = ()

    other_aggregate: bool = False  # "average", "sum of hours": not a count of records
    asked_types: list[str] = field(default_factory=list)  # named by their own words as the records asked for
    measure: str | None = None  # "MAX" of "the largest estimate": an aggregate of a measure the words ask for

    @property
    def kind(self) -> AnswerKind:
        if self.notices:
            return AnswerKind.NOTICE
        if (
            self.notes
            and not self.lookups
            and not self.has_conditions
            and not self.count
            and not self.group_by
        ):
            return AnswerKind.NOTICE  # understood, but it applies to nothing asked about: said, not searched
        if self.lookups:
            return AnswerKind.LOOKUP
        if self.other_aggregate:
            return AnswerKind.TOPIC
        if self.count or self.group_by:
            # "how many tasks mention invoices": a topic is not a filter, so there is nothing exact to count
            # (a word said not to be a known value is not a topic: the count is of the type, with the note)
            if self.topic and not self.has_conditions and not self.group_by and not self.notes:
                return AnswerKind.TOPIC
            return AnswerKind.COUNT
        if self.has_conditions or self.advice:
            return AnswerKind.LIST
        return AnswerKind.TOPIC

    @property
    def has_conditions(self) -> bool:
        return any(self.per_type.values()) or bool(self.conditions)

    def conditions_of(self, source_type: str | None) -> list[Condition]:
        if source_type is not None and source_type in self.per_type:
            return self.per_type[source_type]
        return self.conditions

    @property
    def structured(self) -> bool:
        return self.kind != AnswerKind.TOPIC

    def keys(self) -> list[str]:
        every = [*self.conditions, *(c for conds in self.per_type.values() for c in conds)]
        return list(dict.fromkeys(c.key for c in every))
