"""Model generations: which model wrote each stored vector, and which one searches read.

Every vector in RAG_CHUNK belongs to a generation (RAG_MODEL_GENERATION: a
model's name, the name the database runs it under, a fingerprint of its
file, its prefixes). A generation owns one of two vector slots, a column
pair of RAG_CHUNK (``EMBEDDING`` / ``EMBEDDING_GEN`` and ``EMBEDDING_2`` /
``EMBEDDING_2_GEN``): the vector and the id of the generation that wrote it,
so a vector left by a dropped generation in a reused slot is never taken for
the new one's. Exactly one generation is ACTIVE: every read embeds the query
with its model and compares it with its column, and nothing else.

A statement that compares vectors is written with two placeholders,
``{embedding}`` (the column) and ``{model}`` (the model that embeds the
query), and :func:`render` fills both from the same :class:`Generation`:
there is no placeholder for a second model, and a rendered text that names
another slot's column is refused. ``tests/test_model_generations.py`` tries.

States: LOADING (registered, its model being loaded or built: nothing writes
it), STANDBY (every write embeds it too and the worker fills its missing
vectors behind the queue: the generation being switched to, or the one a
rollback returns to), ACTIVE (searched). ``docs/embedding.md``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from oracle_rag.errors import ConfigurationError

SLOTS = (1, 2)
LOADING, STANDBY, ACTIVE = "LOADING", "STANDBY", "ACTIVE"
LIVE = (STANDBY, ACTIVE)

# The embedded engine writes its model's name as a SQL literal (the first
# argument of vector_embedding): only these characters, so no quote can occur.
_SQLITE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
_ORACLE_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_$#]{0,122}$")
_COLUMN = {1: "EMBEDDING", 2: "EMBEDDING_2"}


def column(slot: int) -> str:
    """The vector column of ``slot`` (its generation stamp is this name + ``_GEN``)."""
    try:
        return _COLUMN[slot]
    except KeyError:
        raise ConfigurationError(f"vector slot {slot} does not exist (slots: 1, 2)") from None


@dataclass(frozen=True)
class Generation:
    generation_id: int
    model_name: str  # the catalog's name (embedding/catalog.py)
    db_model: str  # the name Oracle runs it under (VECTOR_EMBEDDING); upper-case identifier
    fingerprint: str | None  # sha256 of the model file, once loaded
    dimensions: int
    slot: int
    state: str
    query_prefix: str = ""
    passage_prefix: str = ""
    created_at: Any = None
    activated_at: Any = None

    @property
    def column(self) -> str:
        return column(self.slot)

    @property
    def live(self) -> bool:
        """Written by every chunk write (ACTIVE, or STANDBY: being filled or kept for a rollback)."""
        return self.state in LIVE

    def query_text(self, text: str) -> str:
        return self.query_prefix + text

    def passage_text(self, text: str) -> str:
        return self.passage_prefix + text

    def text_as(self, kind: str, text: str) -> str:
        """``text`` with the prefix its model expects for ``kind``: "query" (a question) or "passage"
        (a text a question is compared with), as e5 was trained; an unknown kind is an error, not
        no prefix."""
        if kind == "query":
            return self.query_text(text)
        if kind == "passage":
            return self.passage_text(text)
        raise ValueError(f"embedding kind must be 'query' or 'passage', not {kind!r}")

    def label(self) -> str:
        return f"{self.model_name} (generation {self.generation_id})"

    @classmethod
    def from_row(cls, row: Any) -> Generation:
        return cls(
            int(row[0]),
            str(row[1]),
            str(row[2]),
            None if row[3] is None else str(row[3]),
            int(row[4]),
            int(row[5]),
            str(row[6]),
            str(row[7] or ""),
            str(row[8] or ""),
            row[9],
            row[10],
        )


# Generation 1 as migration V16 registers it: the vectors written before generations existed.
INITIAL = Generation(1, "all-MiniLM-L6-v2", "ALL_MINILM_L12_V2", None, 384, 1, ACTIVE)


def model_literal(gen: Generation, engine_name: str) -> str:
    """``{model}`` as ``engine_name`` writes it: Oracle's identifier, or the embedded engine's quoted name."""
    if engine_name == "oracle":
        if not _ORACLE_NAME.match(gen.db_model):
            raise ConfigurationError(f"generation {gen.generation_id}: {gen.db_model!r} is not an identifier")
        return gen.db_model.upper()
    if not _SQLITE_NAME.match(gen.model_name):
        raise ConfigurationError(
            f"generation {gen.generation_id}: model name {gen.model_name!r} is not allowed"
        )
    return f"'{gen.model_name}'"


_OTHER_COLUMN = re.compile(r"\bEMBEDDING(?:_2)?\b")


def render(text: str, gen: Generation, engine_name: str) -> str:
    """Fill ``{embedding}`` and ``{model}`` from one generation.

    A statement that compares vectors can only read ``gen``'s column and
    embed with ``gen``'s model: both come from this one argument, and a
    template that names a vector column itself is refused.
    """
    named = sorted({m.group(0) for m in _OTHER_COLUMN.finditer(text)})
    if named:
        raise ConfigurationError(
            f"a statement for {gen.label()} names a vector column itself "
            f"({', '.join(named)}), which may be another generation's column: refused"
        )
    return text.replace("{embedding}", gen.column).replace("{model}", model_literal(gen, engine_name))


def needs_generation(text: str) -> bool:
    return "{embedding}" in text or "{model}" in text


def slot_value(text: str, slot: int, value: str) -> str:
    """A write statement's ``{vector_<slot>}`` filled with ``value`` (a fixed fragment
    from generation_sql)."""
    return text.replace(f"{{vector_{slot}}}", value)
