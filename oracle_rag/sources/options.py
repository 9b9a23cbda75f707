"""The options of a ``[sources.NAME]`` table, declared once: shape, bounds, default and meaning.

A SQL-query source takes some thirty options (where its rows come from, what they mean to
questions, who may read them). Each is an :class:`Option`; the schemas live next to the code that
uses the values (``sql_query.SOURCE_OPTIONS``, ``connections.URL_OPTIONS``,
``sql_meanings.MEANING_OPTIONS``, ``access.ACCESS_OPTIONS``) and :func:`read_options` checks a table
against them in one pass: every value against its shape and bounds, a ConfigurationError naming the
key (``sources.NAME.KEY``) on the first that does not fit. What involves several options (a role
named twice, ``done_values`` without a lifecycle, the group rule without group data) is checked by
the code that combines them, after.

The same declarations render the option tables of docs/sql-sources.md (:func:`options_table`;
tests/test_sql_sources_config.py compares them), so the documented defaults and bounds are the
enforced ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from oracle_rag.errors import ConfigurationError
from oracle_rag.sources.durations import checked_duration, format_seconds

MAX_WORDS = 64
MAX_LABEL = 128

Reader = Callable[[Any, str], Any]


def word_list(value: Any, key: str, *, limit: int = MAX_WORDS) -> tuple[str, ...]:
    if (
        isinstance(value, str)
        or not isinstance(value, list | tuple)
        or not value
        or len(value) > limit
        or not all(isinstance(w, str) and 0 < len(w.strip()) <= 60 for w in value)
    ):
        raise ConfigurationError(
            f"{key}: expected a list of 1 to {limit} words (1-60 characters each)", key=key
        )
    return tuple(w.strip() for w in value)


def facet_name(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{key}: expected a facet (a column label)", key=key)
    return value.strip().lower()


def integer(value: Any, key: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigurationError(f"{key}: expected an integer in [{lo:,}, {hi:,}]", key=key)
    try:
        number = int(value)
    except ValueError:
        raise ConfigurationError(f"{key}: expected an integer in [{lo:,}, {hi:,}]", key=key) from None
    if not lo <= number <= hi:
        raise ConfigurationError(f"{key}: {number:,} is out of range [{lo:,}, {hi:,}]", key=key)
    return number


def column_label(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_LABEL:
        raise ConfigurationError(f"{key}: expected a column label (1 to {MAX_LABEL} characters)", key=key)
    return value


@dataclass(frozen=True)
class Option:
    """One option of ``[sources.NAME]``: the shape of its value, its bounds, its default, what it says.

    ``shape`` names how the value is read: ``words``, ``facet``, ``facets``, ``word_table``,
    ``label_table`` (the meaning options), ``integer`` and ``duration`` (within ``bounds``),
    ``column`` (a column label), ``text`` (a non-empty string, returned as given), or ``custom``
    with a ``reader`` of the module that owns the value (a query, a connection name, the access
    rules). ``read`` checks the shape alone; what the value must agree with elsewhere in the table
    is checked where the options are combined."""

    key: str
    shape: str
    summary: str  # what it says, for the documentation
    default: Any = None  # the value an absent option reads as (None: absent stays absent)
    required: bool = False  # an absent one is read too (None): its reader says what is missing
    shown_default: str = ""  # the documented default when it is not just ``default``
    accepts: str = ""  # the documented values when the shape and bounds do not say it
    limit: int = MAX_WORDS  # at most this many words, facets or table entries
    exact: int | None = None  # exactly this many words
    bounds: tuple[float, float] | None = None  # an integer's or a duration's range, inclusive
    message: str = ""  # a ``text`` option's refusal (after "KEY: "), when not the generic one
    facet_kind: str | None = None  # the facet it names must be of this kind ("an enum facet")
    names_facets: bool = False  # a list or table naming facets of this source
    fold_keys: bool = False  # table keys are facets (lowercased)
    reader: Reader | None = None  # the ``custom`` shape's reader: (value, key) -> the value read

    def read(self, value: Any, key: str) -> Any:
        if self.reader is not None:
            return self.reader(value, key)
        if self.shape == "integer":
            lo, hi = self._bounds()
            return integer(value, key, int(lo), int(hi))
        if self.shape == "duration":
            lo, hi = self._bounds()
            return checked_duration(value, key=key, lo=lo, hi=hi)
        if self.shape == "column":
            return column_label(value, key)
        if self.shape == "text":
            if not isinstance(value, str) or not value.strip():
                raise ConfigurationError(f"{key}: {self.message or 'expected a non-empty string'}", key=key)
            return value
        if self.shape == "words":
            words = word_list(value, key, limit=self.limit)
            if self.exact is not None and len(words) != self.exact:
                raise ConfigurationError(f"{key}: expected [singular, plural]", key=key)
            return words
        if self.shape == "facet":
            return facet_name(value, key)
        if self.shape == "facets":
            return tuple(facet_name(p, key) for p in word_list(value, key, limit=self.limit))
        if self.shape in ("word_table", "label_table"):
            return self._table(value, key)
        raise AssertionError(f"option {self.key}: shape {self.shape!r} has no reader")

    def _bounds(self) -> tuple[float, float]:
        assert self.bounds is not None, f"option {self.key}: an {self.shape} needs bounds"
        return self.bounds

    def _table(self, value: Any, key: str) -> dict[str, Any]:
        if not isinstance(value, Mapping) or not value or len(value) > self.limit:
            expected = "facet = [words]" if self.fold_keys else "VALUE = [words]"
            if self.shape == "label_table":
                expected = 'facet = "label"'
            raise ConfigurationError(f"{key}: expected a table of {expected}", key=key)
        if self.shape == "word_table":
            return {
                (str(k).lower() if self.fold_keys else str(k)): word_list(v, f"{key}.{k}")
                for k, v in value.items()
            }
        labels = {}
        for facet, label in value.items():
            if not isinstance(label, str) or not 0 < len(label.strip()) <= 60:
                raise ConfigurationError(f"{key}.{facet}: expected a label (1-60 characters)", key=key)
            labels[str(facet).lower()] = label.strip()
        return labels

    # -- the documentation ------------------------------------------------------------
    def documented_default(self) -> str:
        if self.shown_default:
            return self.shown_default
        if self.required:
            return "required"
        if self.default is None:
            return "none"
        if self.shape == "duration":
            return f"`{format_seconds(self.default)}`"
        if self.shape == "integer":
            return f"{self.default:,}"
        return f"`{self.default}`"

    def documented_values(self) -> str:
        if self.accepts:
            return self.accepts
        if self.shape == "integer":
            lo, hi = self._bounds()
            return f"an integer, {int(lo):,} to {int(hi):,}"
        if self.shape == "duration":
            lo, hi = self._bounds()
            return f"a duration, {format_seconds(lo)} to {format_seconds(hi)}"
        if self.shape == "column":
            return f"a column label (1 to {MAX_LABEL} characters)"
        if self.shape == "words":
            return "[singular, plural]" if self.exact else f"a list of 1 to {self.limit} words"
        raise AssertionError(f"option {self.key}: say what it accepts (accepts=...)")


def read_options(schema: Iterable[Option], prefix: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Each option of ``schema`` that ``options`` gives (or has a default, or is required), in schema order.

    None means not given, as a TOML table cannot say it. A value that does not fit its option is a
    ConfigurationError naming ``PREFIX.KEY``."""
    out: dict[str, Any] = {}
    for option in schema:
        value = options.get(option.key)
        if value is None:
            if option.default is None and not option.required:
                continue
            value = option.default
        out[option.key] = option.read(value, f"{prefix}.{option.key}")
    return out


def options_table(schema: Iterable[Option]) -> str:
    """The Markdown table docs/sql-sources.md shows for ``schema`` (a test keeps the two equal)."""
    rows = ["| option | default | accepted | meaning |", "|---|---|---|---|"]
    rows += [
        f"| `{o.key}` | {o.documented_default()} | {o.documented_values()} | {o.summary} |" for o in schema
    ]
    return "\n".join(rows)
