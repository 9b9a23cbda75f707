"""The meaning options of a SQL-query source: what its rows mean to questions.

``[sources.NAME]`` may declare, besides ``facet_columns``::

    words = ["case", "caso", "casos"]          # record words beyond its name's (tickets -> ticket/tickets)
    person_facets = ["owner_id"]                # columns holding employee ids; the first is "my"
    lifecycle = "state"                         # the enum facet that is the record's state
    done_values = ["SOLVED"]                    # its values meaning finished
    due_facet = "due"                           # the date "overdue" / "due this week" use
    facet_cues = { severity = ["severidad"] }   # more words naming a facet
    display = ["severity", "state", "opened"]   # facets a list shows per record
    value_words = { SOLVED = ["resuelto", "resuelta"] }   # other words for its values (plurals/gender follow)
    nouns_es = ["caso", "casos"]                # how Spanish answers name one and several records
    labels_es = { severity = "severidad" }      # a facet's label in Spanish answers

Defaults: the person facet is the owner column (when the source declares
facets); the due facet is the one date facet with "due" in its name; a
facet's cue words are its label's words, with a plural. Everything is
checked against one declared schema (``MEANING_OPTIONS``, sources/options.py: shape,
bounds, what an option may name), with a ConfigurationError naming the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from oracle_rag.errors import ConfigurationError
from oracle_rag.sources.facets import PERSON_CUES, Facet, check_facet_name
from oracle_rag.sources.meanings import Meanings, check_meanings
from oracle_rag.sources.options import Option

# The schema of the meaning options, in the order docs/sql-sources.md lists them (a test compares the two).
MEANING_OPTIONS: tuple[Option, ...] = (
    Option("words", "words", "record words beyond its name's (tickets -> ticket/tickets)"),
    Option("person_facets", "facets", 'columns holding employee ids; the first is "my"', limit=8),
    Option("lifecycle", "facet", "the enum facet that is the record's state", facet_kind="enum"),
    Option("done_values", "words", "its values meaning finished"),
    Option("due_facet", "facet", 'the date "overdue" and "due this week" use', facet_kind="date"),
    Option("facet_cues", "word_table", "more words naming a facet", names_facets=True, fold_keys=True),
    Option("display", "facets", "facets a list shows per record", names_facets=True),
    Option("value_words", "word_table", "other words for its values", limit=256),
    Option("nouns_es", "words", "how Spanish answers name one and several records", limit=2, exact=2),
    Option("labels_es", "label_table", "a facet's label in Spanish answers", names_facets=True),
)
MEANING_KEYS = tuple(o.key for o in MEANING_OPTIONS)
_BY_KEY = {o.key: o for o in MEANING_OPTIONS}
_ARTICLE = {"enum": "an enum", "date": "a date"}


def record_nouns(name: str) -> tuple[str, str]:
    """(singular, plural) from a source's name: tickets -> (ticket, tickets), case -> (case, cases)."""
    words = [w for w in name.replace("-", "_").replace(".", "_").lower().split("_") if w]
    last = words[-1] if words else name.lower()
    if last.endswith("ies") and len(last) > 4:
        return last[:-3] + "y", last
    if last.endswith("s") and not last.endswith("ss") and len(last) > 3:
        return last[:-1], last
    return last, last + "s"


def default_cues(name: str) -> tuple[str, ...]:
    """A facet's words from its label: owner_id -> owner, owners; opened_at -> opened at, opened."""
    words = [w for w in name.split("_") if w and w != "id"]
    if not words:
        return (name,)
    head = words[-1] if words[-1] not in ("at", "on", "date") or len(words) == 1 else words[0]
    return tuple(dict.fromkeys([" ".join(words), head, head + "s", *words]))


@dataclass(frozen=True)
class SqlMeanings:
    """The checked meaning options: extra facets (people) and the :class:`Meanings`."""

    person_columns: tuple[str, ...]
    meanings: Meanings
    cues: Mapping[str, tuple[str, ...]]

    def definition(self) -> list[Any]:
        """What shapes the stored documents (person facets are stored on every chunk)."""
        return list(self.person_columns)


def sql_meanings(
    name: str, given: Mapping[str, Any], facet_columns: Mapping[str, str], owner_column: str | None
) -> SqlMeanings:
    """The meanings of source ``name`` from its meaning options as read (``read_options`` with
    :data:`MEANING_OPTIONS`: each value's shape checked), checked against its facets here."""
    prefix = f"sources.{name}"
    kinds = {label.lower(): kind for label, kind in facet_columns.items()}
    people: tuple[str, ...] = given.get("person_facets", ())
    if "person_facets" not in given and owner_column is not None and (facet_columns or given):
        people = (owner_column.lower(),)
    _check_people(prefix, people, kinds)
    facets = {**kinds, **{p: "ref" for p in people}}
    for key, value in given.items():
        _check_names(prefix, _BY_KEY[key], value, kinds, facets)
    lifecycle = given.get("lifecycle")
    if "done_values" in given and lifecycle is None:
        raise ConfigurationError(
            f"{prefix}.done_values: needs lifecycle (the facet the values belong to)",
            key=f"{prefix}.done_values",
        )
    due = given.get("due_facet")
    if due is None:
        named_due = [d for d, kind in kinds.items() if kind == "date" and "due" in d.split("_")]
        due = named_due[0] if len(named_due) == 1 else None
    words = given.get("words", ())
    singular, plural = record_nouns(name)
    nouns_es = given.get("nouns_es", (singular, plural))
    if "nouns_es" in given:
        words = tuple(dict.fromkeys([*words, *nouns_es]))
    meanings = Meanings(
        nouns={"en": (singular, plural), "es": nouns_es},
        words=words,
        mine=people[0] if people else None,
        lifecycle=lifecycle,
        done=given.get("done_values", ()),
        due=due,
        display=given.get("display", ()),
        anchor=name.upper(),
        id_prefix=f"{name}#",
        value_words=given.get("value_words", {}),
        labels_es=given.get("labels_es", {}),
    )
    return SqlMeanings(people, meanings, given.get("facet_cues", {}))


def _check_people(prefix: str, people: tuple[str, ...], kinds: Mapping[str, str]) -> None:
    key = f"{prefix}.person_facets"
    for person in people:
        try:
            check_facet_name(person)
        except ConfigurationError:
            raise ConfigurationError(
                f"{key}: {person!r} cannot be a facet name (letters, digits "
                f"and _); alias the column in the query",
                key=key,
            ) from None
        if person in kinds:
            raise ConfigurationError(
                f"{key}: {person!r} is also in facet_columns; a person "
                f"facet holds employee ids, name it in one place",
                key=key,
            )
    if len(set(people)) != len(people):
        raise ConfigurationError(f"{key}: a column is named twice", key=key)


def _check_names(
    prefix: str, option: Option, value: Any, kinds: Mapping[str, str], facets: Mapping[str, str]
) -> None:
    """What an option names exists: a facet of the declared kind, or facets of this source."""
    key = f"{prefix}.{option.key}"
    if option.facet_kind is not None and kinds.get(value) != option.facet_kind:
        raise ConfigurationError(
            f"{key}: {value!r} is not {_ARTICLE[option.facet_kind]} facet of facet_columns", key=key
        )
    if option.names_facets:
        unknown = [n for n in value if n not in facets]
        if unknown:
            raise ConfigurationError(f"{key}: {unknown[0]!r} is not a facet of this source", key=key)


def sql_facets(source: str, facet_columns: Mapping[str, str], meanings: SqlMeanings) -> tuple[Facet, ...]:
    """The facets of a SQL source: its facet columns, then its person facets."""
    out = []
    for label, kind in facet_columns.items():
        name = label.lower()
        cues = tuple(dict.fromkeys([*default_cues(name), *meanings.cues.get(name, ())]))
        out.append(
            Facet(
                name,
                kind,
                name.replace("_", " "),
                cues,
                due=name == meanings.meanings.due,
                label_es=meanings.meanings.labels_es.get(name, ""),
            )
        )
    for name in meanings.person_columns:
        label = " ".join(w for w in name.split("_") if w != "id") or name
        cues = tuple(dict.fromkeys([*default_cues(name), *PERSON_CUES, *meanings.cues.get(name, ())]))
        out.append(
            Facet(name, "ref", label, cues, person=True, label_es=meanings.meanings.labels_es.get(name, ""))
        )
    facets = tuple(out)
    check_meanings(source, facets, meanings.meanings, key=f"sources.{source}")
    return facets


def meaning_warnings(name: str, meanings: Meanings, facets: Iterable[Mapping[str, Any]]) -> list[str]:
    """``done_values`` the lifecycle facet never holds in the rows read (a typo, or values not there yet).

    A warning, not an error: a new table may hold no finished row yet. But "open" means "none of the
    done values", so a misspelt one counts every finished row as open; the refresh says so."""
    if meanings.lifecycle is None or not meanings.done:
        return []
    held = {f.get(meanings.lifecycle) for f in facets} - {None}
    if not held:
        return []
    unseen = [v for v in meanings.done if v not in held]
    if not unseen:
        return []
    return [
        f"sources.{name}.done_values: {', '.join(map(repr, unseen))} not found among the values of "
        f'{meanings.lifecycle!r} in the data ({", ".join(sorted(map(str, held)))}); "open" counts every row '
        f"that is not {' or '.join(meanings.done)}"
    ]
