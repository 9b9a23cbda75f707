"""The meaning options of a SQL-query source (issue 22): what its rows mean to questions.

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
checked here, with a ConfigurationError naming the key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import ConfigurationError
from .facets import PERSON_CUES, Facet, check_facet_name
from .meanings import Meanings, check_meanings

MEANING_KEYS = ("words", "person_facets", "lifecycle", "done_values", "due_facet", "facet_cues", "display",
                "value_words", "nouns_es", "labels_es")
MAX_WORDS = 64


def _word_list(value: Any, key: str, *, limit: int = MAX_WORDS) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, list | tuple) or not value or len(value) > limit or not all(
            isinstance(w, str) and 0 < len(w.strip()) <= 60 for w in value):
        raise ConfigurationError(f"{key}: expected a list of 1 to {limit} words (1-60 characters each)", key=key)
    return tuple(w.strip() for w in value)


def _name(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{key}: expected a facet (a column label)", key=key)
    return value.strip().lower()


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


def sql_meanings(name: str, options: Mapping[str, Any], facet_columns: Mapping[str, str],
                 owner_column: str | None) -> SqlMeanings:
    prefix = f"sources.{name}"
    kinds = {label.lower(): kind for label, kind in facet_columns.items()}
    declared = any(options.get(k) is not None for k in MEANING_KEYS)
    if options.get("person_facets") is not None:
        people = tuple(_name(p, f"{prefix}.person_facets") for p in
                       _word_list(options["person_facets"], f"{prefix}.person_facets", limit=8))
    elif owner_column is not None and (facet_columns or declared):
        people = (owner_column.lower(),)
    else:
        people = ()
    for person in people:
        try:
            check_facet_name(person)
        except ConfigurationError:
            raise ConfigurationError(f"{prefix}.person_facets: {person!r} cannot be a facet name (letters, digits "
                                     f"and _); alias the column in the query", key=f"{prefix}.person_facets") from None
        if person in kinds:
            raise ConfigurationError(f"{prefix}.person_facets: {person!r} is also in facet_columns; a person "
                                     f"facet holds employee ids, name it in one place", key=f"{prefix}.person_facets")
    if len(set(people)) != len(people):
        raise ConfigurationError(f"{prefix}.person_facets: a column is named twice", key=f"{prefix}.person_facets")
    facets = {**kinds, **{p: "ref" for p in people}}

    lifecycle = None
    if options.get("lifecycle") is not None:
        lifecycle = _name(options["lifecycle"], f"{prefix}.lifecycle")
        if kinds.get(lifecycle) != "enum":
            raise ConfigurationError(f"{prefix}.lifecycle: {lifecycle!r} is not an enum facet of facet_columns",
                                     key=f"{prefix}.lifecycle")
    done: tuple[str, ...] = ()
    if options.get("done_values") is not None:
        done = _word_list(options["done_values"], f"{prefix}.done_values")
        if lifecycle is None:
            raise ConfigurationError(f"{prefix}.done_values: needs lifecycle (the facet the values belong to)",
                                     key=f"{prefix}.done_values")
    dates = [label for label, kind in kinds.items() if kind == "date"]
    due = None
    if options.get("due_facet") is not None:
        due = _name(options["due_facet"], f"{prefix}.due_facet")
        if kinds.get(due) != "date":
            raise ConfigurationError(f"{prefix}.due_facet: {due!r} is not a date facet of facet_columns",
                                     key=f"{prefix}.due_facet")
    else:
        named_due = [d for d in dates if "due" in d.split("_")]
        due = named_due[0] if len(named_due) == 1 else None

    cues: dict[str, tuple[str, ...]] = {}
    raw_cues = options.get("facet_cues")
    if raw_cues is not None:
        if not isinstance(raw_cues, Mapping) or not raw_cues:
            raise ConfigurationError(f"{prefix}.facet_cues: expected a table of facet = [words]",
                                     key=f"{prefix}.facet_cues")
        for facet, items in raw_cues.items():
            folded = str(facet).lower()
            if folded not in facets:
                raise ConfigurationError(f"{prefix}.facet_cues: {facet!r} is not a facet of this source",
                                         key=f"{prefix}.facet_cues")
            cues[folded] = _word_list(items, f"{prefix}.facet_cues.{facet}")
    display: tuple[str, ...] = ()
    if options.get("display") is not None:
        display = tuple(_name(d, f"{prefix}.display") for d in _word_list(options["display"], f"{prefix}.display"))
        unknown = [d for d in display if d not in facets]
        if unknown:
            raise ConfigurationError(f"{prefix}.display: {unknown[0]!r} is not a facet of this source",
                                     key=f"{prefix}.display")
    words = _word_list(options["words"], f"{prefix}.words") if options.get("words") is not None else ()
    singular, plural = record_nouns(name)
    nouns_es = (singular, plural)
    if options.get("nouns_es") is not None:
        given = _word_list(options["nouns_es"], f"{prefix}.nouns_es", limit=2)
        if len(given) != 2:
            raise ConfigurationError(f"{prefix}.nouns_es: expected [singular, plural]", key=f"{prefix}.nouns_es")
        nouns_es = (given[0], given[1])
        words = tuple(dict.fromkeys([*words, *given]))
    value_words: dict[str, tuple[str, ...]] = {}
    raw_values = options.get("value_words")
    if raw_values is not None:
        if not isinstance(raw_values, Mapping) or not raw_values or len(raw_values) > 256:
            raise ConfigurationError(f"{prefix}.value_words: expected a table of VALUE = [words]",
                                     key=f"{prefix}.value_words")
        for value, items in raw_values.items():
            value_words[str(value)] = _word_list(items, f"{prefix}.value_words.{value}")
    labels_es: dict[str, str] = {}
    raw_labels = options.get("labels_es")
    if raw_labels is not None:
        if not isinstance(raw_labels, Mapping) or not raw_labels:
            raise ConfigurationError(f"{prefix}.labels_es: expected a table of facet = \"label\"",
                                     key=f"{prefix}.labels_es")
        for facet, label in raw_labels.items():
            if str(facet).lower() not in facets:
                raise ConfigurationError(f"{prefix}.labels_es: {facet!r} is not a facet of this source",
                                         key=f"{prefix}.labels_es")
            if not isinstance(label, str) or not 0 < len(label.strip()) <= 60:
                raise ConfigurationError(f"{prefix}.labels_es.{facet}: expected a label (1-60 characters)",
                                         key=f"{prefix}.labels_es")
            labels_es[str(facet).lower()] = label.strip()
    meanings = Meanings(nouns={"en": (singular, plural), "es": nouns_es}, words=words,
                        mine=people[0] if people else None, lifecycle=lifecycle, done=done, due=due,
                        display=display, anchor=name.upper(), id_prefix=f"{name}#", value_words=value_words,
                        labels_es=labels_es)
    return SqlMeanings(people, meanings, cues)


def sql_facets(source: str, facet_columns: Mapping[str, str], meanings: SqlMeanings) -> tuple[Facet, ...]:
    """The facets of a SQL source: its facet columns, then its person facets."""
    out = []
    for label, kind in facet_columns.items():
        name = label.lower()
        cues = tuple(dict.fromkeys([*default_cues(name), *meanings.cues.get(name, ())]))
        out.append(Facet(name, kind, name.replace("_", " "), cues, due=name == meanings.meanings.due,
                         label_es=meanings.meanings.labels_es.get(name, "")))
    for name in meanings.person_columns:
        label = " ".join(w for w in name.split("_") if w != "id") or name
        cues = tuple(dict.fromkeys([*default_cues(name), *PERSON_CUES, *meanings.cues.get(name, ())]))
        out.append(Facet(name, "ref", label, cues, person=True, label_es=meanings.meanings.labels_es.get(name, "")))
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
    return [f"sources.{name}.done_values: {', '.join(map(repr, unseen))} not found among the values of "
            f"{meanings.lifecycle!r} in the data ({', '.join(sorted(map(str, held)))}); \"open\" counts every row "
            f"that is not {' or '.join(meanings.done)}"]
