"""SQL-query knowledge sources: any SELECT becomes documents, one per row.

A source is declared by a name, a query and options (TOML ``[sources.NAME]``
or :class:`SqlSource` in code). Each row becomes one document, never split:

* ``id`` and ``content`` columns are required, ``title`` is optional (names
  configurable with ``id_column``/``content_column``/``title_column``, matched
  ignoring case). ``owner_column`` maps rows into the access scope;
  ``updated_at_column`` enables incremental reads.
* Every other column becomes metadata under the label the driver reports
  (SQL NULLs left out). The product sets ``source``, ``document_id``, ``id``
  and ``title`` itself (plus ``owner_id`` with an owner column and
  ``updated_at`` with an updated-at column); a query column with one of those
  labels is refused rather than silently overwritten.
* Document id ``<source name>#<row id>``; chunk text ``<title>\\n<content>``
  (just the content without a title; the document id when both are empty,
  so a chunk is never empty text, which Oracle would store as NULL).

A bad row fails the whole source (nothing skipped): a NULL or blank id, a
NULL content, an id seen twice. Messages name row numbers and column labels,
never values, because a value may be anything (a customer's note, an e-mail).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import math
import re
from collections import Counter
from collections.abc import Generator, Iterable, Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import sqlalchemy as sa

from oracle_rag.engines.records import check_group, read_lob
from oracle_rag.errors import ConfigurationError, InputError, SourceLoadingError
from oracle_rag.sources import sql_query_sql as q
from oracle_rag.sources.access import ACCESS_OPTIONS, LEGACY, AccessPolicy, SourceAccess, source_access
from oracle_rag.sources.connections import (
    RAG_CONNECTION,
    URL_OPTIONS,
    UrlOptions,
    check_connection_name,
    check_url_options,
)
from oracle_rag.sources.facets import Facet, check_facet_name
from oracle_rag.sources.meanings import Declaration
from oracle_rag.sources.options import Option, column_label, read_options
from oracle_rag.sources.sql_meanings import MEANING_OPTIONS, meaning_warnings, sql_facets, sql_meanings
from oracle_rag.sql_scripts import skip_gap, skip_literal

# -- options ---------------------------------------------------------------------------
ROLE_OPTIONS = {
    "id": "id_column",
    "content": "content_column",
    "title": "title_column",
    "owner": "owner_column",
    "updated_at": "updated_at_column",
}
DEFAULT_COLUMNS = {"id": "id", "content": "content", "title": "title"}
TIMEOUT_RANGE = (1.0, 3600.0)
REFRESH_RANGE = (1.0, 30 * 86400.0)
MAX_ROWS_RANGE = (1, 1_000_000)
FETCH_SIZE_RANGE = (1, 10_000)
MAX_FACET_COLUMNS = 32
FACET_KINDS = ("enum", "number", "date")
# RAG_CHUNK.SOURCE_TYPE is VARCHAR2(64) and SOURCE_ID VARCHAR2(256) on Oracle.
MAX_DOCUMENT_ID = 256
ALWAYS_RESERVED = ("source", "document_id", "id", "title")
_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$")
_START = re.compile(r"(SELECT|WITH)\b", re.IGNORECASE)
_REFERENCE_TYPES = ("TASK", "SPRINT", "PROJECT", "COMMENT", "TASK_COMMENT")


def check_source_name(name: Any) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigurationError(
            "sources: a source name is a letter then letters, digits, '_', '.', '-' (<= 64 characters)",
            key="sources",
        )
    if name.upper() in _REFERENCE_TYPES:
        raise ConfigurationError(
            f"sources.{name}: the name is taken by a reference source type", key=f"sources.{name}"
        )
    return name


def check_query(query: Any, *, key: str = "query") -> str:
    """The query as it will run, or CONFIGURATION saying what is refused.

    Accepted: one statement starting with SELECT or WITH (any case), after
    optional whitespace and comments (which are dropped). One trailing ``;``
    is dropped; any other ``;`` outside quotes and comments is refused, as
    are placeholders: ``${`` anywhere, and bind markers (``:name``, ``%s``,
    ``%(name)s``) outside quotes, because a source query takes no parameters.
    """
    if not isinstance(query, str) or not query.strip():
        raise ConfigurationError(f"{key}: a SELECT statement is required", key=key)
    if "${" in query:
        raise ConfigurationError(
            f"{key}: placeholders (${{...}}) are not allowed; the query runs as written", key=key
        )
    text = query.replace("\r\n", "\n")
    start = skip_gap(text, 0, slash_lines=False)
    if not _START.match(text, start):
        raise ConfigurationError(f"{key}: the query must start with SELECT or WITH", key=key)
    n = len(text)
    end = n
    i = start
    while i < n:
        skipped = skip_literal(text, i)
        if skipped is not None:
            i = skipped
            continue
        ch = text[i]
        nxt = text[i + 1] if i + 1 < n else ""
        if ch == ";":
            if skip_gap(text, i + 1, slash_lines=False) < n:
                raise ConfigurationError(
                    f"{key}: one statement only; ';' is allowed only at the very end", key=key
                )
            end = i
            break
        if ch == ":" and nxt == ":":  # PostgreSQL cast
            i += 2
            continue
        if ch == ":" and (nxt.isalpha() or nxt == "_"):
            raise ConfigurationError(
                f"{key}: bind placeholders (:name) are not allowed; the query takes no parameters", key=key
            )
        if ch == "%" and nxt in ("s", "("):
            raise ConfigurationError(
                f"{key}: placeholders (%s) are not allowed; the query takes no parameters", key=key
            )
        i += 1
    return text[start:end].rstrip()


def _query(value: Any, key: str) -> str:
    return check_query(value, key=key)


def _connection(value: Any, key: str) -> str:
    return check_connection_name(value, key=key)


def _facet_columns(value: Any, key: str) -> dict[str, str]:
    """``facet_columns``: a list of column labels (enum facets) or a table label -> enum|number|date."""
    items = {str(v): "enum" for v in value} if isinstance(value, list) else value
    if not isinstance(items, Mapping) or not items or len(items) > MAX_FACET_COLUMNS:
        raise ConfigurationError(
            f"{key}: expected a list of column labels or a table of label = enum|number|date "
            f"(1 to {MAX_FACET_COLUMNS} columns)",
            key=key,
        )
    out: dict[str, str] = {}
    for label, kind in items.items():
        column_label(label, key)
        try:
            check_facet_name(str(label).lower())
        except ConfigurationError:
            raise ConfigurationError(
                f"{key}: {label!r} cannot be a facet name (letters, digits and _, a letter "
                f"first); alias the column in the query",
                key=key,
            ) from None
        if kind not in FACET_KINDS:
            raise ConfigurationError(
                f"{key}.{label}: the kind must be one of {', '.join(FACET_KINDS)}", key=key
            )
        if str(label).lower() in {k.lower() for k in out}:
            raise ConfigurationError(f"{key}: {label!r} is named twice (case ignored)", key=key)
        out[str(label)] = str(kind)
    return out


# The schema of a SQL-query source's own options; with the URL, meaning and access options it is
# every key ``[sources.NAME]`` accepts, in this order (the unknown-key error lists them so, and
# docs/sql-sources.md shows ``options_table`` of it: a test compares the two).
SOURCE_OPTIONS: tuple[Option, ...] = (
    Option(
        "query",
        "custom",
        "the rows, one document each",
        required=True,
        accepts="one `SELECT`/`WITH` statement (rules below)",
        reader=_query,
    ),
    Option(
        "connection",
        "custom",
        "the database the query runs on (below)",
        shown_default="`rag`; with `url`, the source's name",
        accepts="a name: a letter, then letters, digits, `_ . -` (≤ 64)",
        reader=_connection,
    ),
    Option(
        "refresh",
        "duration",
        "how often the source is read again",
        shown_default="none (read at load and `sync` only)",
        bounds=REFRESH_RANGE,
    ),
    Option("statement_timeout", "duration", "the longest a read may run", default=30.0, bounds=TIMEOUT_RANGE),
    Option(
        "max_rows",
        "integer",
        "more rows fail the read (none is dropped)",
        default=10_000,
        bounds=MAX_ROWS_RANGE,
    ),
    Option("fetch_size", "integer", "rows fetched at a time", default=500, bounds=FETCH_SIZE_RANGE),
    Option(
        "facet_columns",
        "custom",
        "the columns questions filter and count by (below)",
        accepts=f'a list of column labels (text values) or a table `{{severity = "enum", opened = "date", '
        f'points = "number"}}`; each label a facet name (letters, digits, `_`), 1 to {MAX_FACET_COLUMNS}',
        reader=_facet_columns,
    ),
    Option("id_column", "column", "the row id (the column must exist)", shown_default="`id`"),
    Option(
        "content_column", "column", "the text embedded (the column must exist)", shown_default="`content`"
    ),
    Option("title_column", "column", "the title, embedded before the content", shown_default="`title`"),
    Option("owner_column", "column", "the employee who owns the row (docs/access.md)"),
    Option("updated_at_column", "column", "when the row last changed: incremental reads (below)"),
)
SQL_SOURCE_OPTIONS: tuple[Option, ...] = (*SOURCE_OPTIONS, *URL_OPTIONS, *MEANING_OPTIONS, *ACCESS_OPTIONS)
OPTION_KEYS = tuple(o.key for o in SQL_SOURCE_OPTIONS)


class SqlSource:
    """One SQL-query source: a validated query and options; ``repr`` shows option keys only."""

    def __init__(self, name: str, query: str, connection: str | None = None, **options: Any) -> None:
        self.name = check_source_name(name)
        prefix = f"sources.{name}"
        if "password" in options:
            raise ConfigurationError(
                f"{prefix}.password: passwords are not accepted in configuration; put the password in an "
                f"environment variable and give its name as password_env",
                key=f"{prefix}.password",
            )
        for key in options:
            if key not in OPTION_KEYS:
                raise ConfigurationError(
                    f"{prefix}: unknown option {key!r}; accepted: {', '.join(OPTION_KEYS)}",
                    key=f"{prefix}.{key}",
                )
        self.option_keys = tuple(
            sorted({"query", *options} | ({"connection"} if connection is not None else set()))
        )
        # Every value against its declared shape and bounds, in schema order; then what combines them.
        values = read_options(
            SQL_SOURCE_OPTIONS, prefix, {**options, "query": query, "connection": connection}
        )
        self.query: str = values["query"]
        self.url_options: UrlOptions | None = check_url_options(name, values)
        # A url says "another database": its connection is named after the source
        # rather than make the user invent a name that nothing else refers to.
        self.connection: str = values.get("connection") or (
            self.name if self.url_options is not None else RAG_CONNECTION
        )
        if self.url_options is not None and self.connection == RAG_CONNECTION:
            raise ConfigurationError(
                f"{prefix}: url/user/password_env need a connection name other than {RAG_CONNECTION!r} "
                f"(which is the product's own database)",
                key=f"{prefix}.connection",
            )
        self.refresh_s: float | None = values.get("refresh")
        self.timeout_s: float = values["statement_timeout"]
        self.max_rows: int = values["max_rows"]
        self.fetch_size: int = values["fetch_size"]
        self.columns = self._roles(values, prefix)
        self.explicit_title = "title_column" in values
        self.facet_columns: dict[str, str] = values.get("facet_columns", {})
        meaning_values = {o.key: values[o.key] for o in MEANING_OPTIONS if o.key in values}
        self.sql_meanings = sql_meanings(name, meaning_values, self.facet_columns, self.owner_column)
        self.facets: tuple[Facet, ...] = sql_facets(name, self.facet_columns, self.sql_meanings)
        # Who may read the rows (sources/access.py); none declared: the owner, everyone when there is none.
        self.access_options: SourceAccess | None = source_access(values, prefix)
        if self.access_options is not None and self.access_options.acl_query is not None:
            check_query(self.access_options.acl_query, key=f"{prefix}.acl_query")
        definition: list[Any] = [
            self.query,
            self.connection,
            self.url_options and self.url_options.url,
            sorted(self.columns.items()),
        ]
        if self.facet_columns:  # hashed only when set, so sources defined before facets keep their state
            definition.append(sorted(self.facet_columns.items()))
        if self.sql_meanings.person_columns:  # person facets are stored too (only when there are some)
            definition.append(self.sql_meanings.definition())
        if self.access_options is not None:  # the same: hashed only when declared
            definition.append(self.access_options.definition())
        self._definition_hash = hashlib.sha256(json.dumps(definition).encode("utf-8")).hexdigest()

    def _roles(self, values: Mapping[str, Any], prefix: str) -> dict[str, str]:
        roles = {role: values[key] for role, key in ROLE_OPTIONS.items() if key in values}
        for role, default in DEFAULT_COLUMNS.items():
            if role in roles:
                continue
            if role == "title" and default in {v.lower() for v in roles.values()}:
                continue  # the optional default title yields to a role given that label explicitly
            roles[role] = default
        roles = {role: roles[role] for role in ROLE_OPTIONS if role in roles}
        seen: dict[str, str] = {}
        for role, column in roles.items():
            other = seen.get(column.lower())
            if other is not None:
                raise ConfigurationError(
                    f"{prefix}: column {column!r} is used as two roles ({ROLE_OPTIONS[other]} and "
                    f"{ROLE_OPTIONS[role]})",
                    key=f"{prefix}.{ROLE_OPTIONS[role]}",
                )
            seen[column.lower()] = role
        if "updated_at" in roles:
            for role in ("id", "updated_at"):
                if not q.is_plain_identifier(roles[role]):
                    raise ConfigurationError(
                        f"{prefix}.{ROLE_OPTIONS[role]}: incremental reads need a plain identifier "
                        f"(letters, digits, _)",
                        key=f"{prefix}.{ROLE_OPTIONS[role]}",
                    )
        return roles

    # -- what the product knows about the source -------------------------------------
    @property
    def updated_at_column(self) -> str | None:
        return self.columns.get("updated_at")

    @property
    def owner_column(self) -> str | None:
        return self.columns.get("owner")

    @property
    def access(self) -> AccessPolicy:
        return LEGACY if self.access_options is None else self.access_options.policy

    @property
    def group_column(self) -> str | None:
        return None if self.access_options is None else self.access_options.group_column

    @property
    def acl_query(self) -> str | None:
        return None if self.access_options is None else self.access_options.acl_query

    @property
    def declares_access(self) -> bool:
        """Do its rows carry who may read them (an owner column, a group_column, an acl_query)?

        Such a source's failed read hides it from callers without see-all (indexing/refresh.py).
        """
        if "public" in self.access.rules:
            return False
        return self.owner_column is not None or self.group_column is not None or self.acl_query is not None

    @property
    def definition_hash(self) -> str:
        """Changes when anything that shapes the documents changes (forces a full read)."""
        return self._definition_hash

    @property
    def meanings(self) -> Any:
        return self.sql_meanings.meanings

    def declaration(self) -> Declaration:
        """Its facets and meanings; its person facets are named by the deployment's people
        (oracle_rag/callers/people.py)."""
        return Declaration(self.name, self.facets, self.meanings)

    def reserved_metadata(self) -> tuple[str, ...]:
        extra = (("owner_id",) if self.owner_column else ()) + (
            ("updated_at",) if self.updated_at_column else ()
        )
        return ALWAYS_RESERVED + extra

    def document_id(self, row_id: str) -> str:
        return f"{self.name}#{row_id}"

    def __repr__(self) -> str:
        return f"SqlSource({self.name!r}, options={list(self.option_keys)})"

    __str__ = __repr__

    # -- statements ---------------------------------------------------------------------
    def full_sql(self) -> str:
        return self.query

    def delta_sql(self, template: str = q.DELTA_TEMPLATE) -> str:
        col = self.updated_at_column
        if col is None:
            raise ConfigurationError(f"sources.{self.name}: no updated_at_column", key=f"sources.{self.name}")
        return q.wrap(template, self.query, updated_at=col)

    def ids_sql(self) -> str:
        return q.wrap(q.IDS_TEMPLATE, self.query, id=self.columns["id"])

    # -- reading -------------------------------------------------------------------------
    def meaning_warnings(self, documents: Iterable[SqlDocument]) -> list[str]:
        """What the data read contradicts in the meaning declarations (sql_meanings.meaning_warnings)."""
        return meaning_warnings(self.name, self.meanings, (d.facets for d in documents))

    def read(self, conn: sa.Connection, *, watermark: Watermark | None = None) -> ReadResult:
        """Rows to documents: the full query, or the rows at/after ``watermark``."""
        if watermark is None:
            sql, binds = self.full_sql(), {}
        elif conn.dialect.name == "oracle":
            template, value = watermark.oracle_bind()
            sql, binds = self.delta_sql(template), {"watermark": value}
        else:
            sql, binds = self.delta_sql(), {"watermark": watermark.bind_value()}
        result = ReadResult()
        plan: _Plan | None = None
        with closing(self._fetch(conn, sql, binds)) as batches:
            for labels, rows, first in batches:
                if plan is None:
                    plan = _Plan.build(self, labels)
                for offset, row in enumerate(rows):
                    result.add(self, plan, first + offset, row)
                result.rows_read += len(rows)
        return result

    def read_ids(self, conn: sa.Connection) -> list[str]:
        """Every row id (for incremental refreshes, so deleted rows still leave)."""
        ids: list[str] = []
        first_row: dict[str, int] = {}
        with closing(self._fetch(conn, self.ids_sql(), {})) as batches:
            for _labels, rows, first in batches:
                for offset, row in enumerate(rows):
                    number = first + offset
                    row_id = _row_id(self, row[0], number)
                    if row_id in first_row:
                        raise SourceLoadingError(
                            f"source {self.name!r}: row {number} repeats the id of row {first_row[row_id]}"
                        )
                    first_row[row_id] = number
                    ids.append(row_id)
        return ids

    def read_acl(self, conn: sa.Connection) -> dict[str, tuple[str, ...]]:
        """The ``acl_query`` as groups per row id: ``(row id, group)`` pairs, NULL groups skipped."""
        acl = self.acl_query
        if acl is None:
            return {}
        out: dict[str, dict[str, None]] = {}  # groups per row id, in order, each once (a dict: linear)
        result = conn.execution_options(yield_per=self.fetch_size).execute(
            sa.text(_escape_colons_in_query(acl, acl))
        )
        try:
            number = 0
            while rows := result.fetchmany(self.fetch_size):
                for row in rows:
                    number += 1
                    if len(row) < 2:
                        raise ConfigurationError(
                            f"source {self.name!r}: acl_query must return (row id, group)",
                            key=f"sources.{self.name}.acl_query",
                        )
                    if row[1] is None:
                        continue
                    try:
                        group = check_group(read_lob(row[1]))
                    except InputError as exc:
                        raise SourceLoadingError(
                            f"source {self.name!r}: acl_query row {number}: {exc.message}"
                        ) from None
                    out.setdefault(_row_id(self, row[0], number), {})[group] = None
        finally:
            result.close()
        return {k: tuple(v) for k, v in out.items()}

    def _fetch(
        self, conn: sa.Connection, sql: str, binds: dict[str, Any]
    ) -> Generator[tuple[list[str], Sequence[Any], int], None, None]:
        """Yield (labels, rows, number of the first row) per fetch, refusing more than max_rows."""
        prepared = _escape_colons_in_query(sql, self.query)
        result = conn.execution_options(yield_per=self.fetch_size).execute(sa.text(prepared), binds)
        try:
            labels = [str(k) for k in result.keys()]
            seen = 0
            while True:
                rows = result.fetchmany(self.fetch_size)
                if not rows:
                    if seen == 0:
                        yield labels, [], 1
                    return
                if seen + len(rows) > self.max_rows:
                    raise ConfigurationError(
                        f"source {self.name!r}: the query returns more than max_rows "
                        f"({self.max_rows:,}) rows; "
                        f"raise max_rows (up to {MAX_ROWS_RANGE[1]:,}) or narrow the query",
                        key=f"sources.{self.name}.max_rows",
                    )
                yield labels, rows, seen + 1
                seen += len(rows)
        finally:
            result.close()


def _escape_colons_in_query(sql: str, query: str) -> str:
    """Protect every ':' of the source's own text from SQLAlchemy's bind parsing.

    ``check_query`` refused real bind markers already, so what is left are
    colons in literals, comments and ``::`` casts; ``\\:`` tells ``text()``
    to send a plain ':'. The wrappers' own ``:watermark`` stays a bind.
    """
    return sql.replace(query, query.replace(":", "\\:"), 1)


def _person_value(value: Any) -> int | None:
    """An employee id as a facet value (None when empty or not an integer)."""
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(str(value))
    except ValueError:
        return None
    return int(number) if number.is_integer() else None


def _facet_value(kind: str, value: Any) -> Any:
    if value is None:
        return None
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, int | float):
            try:
                number = float(str(value))
            except ValueError:
                return None
            return int(number) if number.is_integer() else number
        return value
    if kind == "date":
        return str(value)[:10]
    return str(value)


# -- rows to documents --------------------------------------------------------------------
@dataclass(frozen=True)
class SqlDocument:
    """One row as a document: what is embedded, what is compared, what is stored."""

    row_id: str
    document_id: str
    title: str | None
    content: str
    owner_id: int | None
    metadata: dict[str, Any]
    doc_hash: str
    updated_at: Any = None
    facets: dict[str, Any] = field(default_factory=dict)
    # The row's group (group_column): not in the hash, so a group change re-scopes without embedding.
    groups: tuple[str, ...] = ()

    @property
    def chunk_text(self) -> str:
        return chunk_text(self.title, self.content, self.document_id)

    @property
    def metadata_json(self) -> str:
        return json.dumps(self.metadata, sort_keys=True, ensure_ascii=False)


def chunk_text(title: str | None, content: str, document_id: str) -> str:
    """``title`` + newline + ``content``; the content alone without a title; the id when both are empty."""
    parts = [p for p in (title, content) if p]
    return "\n".join(parts) if parts else document_id


@dataclass
class ReadResult:
    documents: dict[str, SqlDocument] = field(default_factory=dict)
    first_row: dict[str, int] = field(default_factory=dict)
    rows_read: int = 0
    watermark: Watermark | None = None

    @property
    def count(self) -> int:
        return len(self.documents)

    def add(self, source: SqlSource, plan: _Plan, number: int, row: Sequence[Any]) -> None:
        doc = plan.document(source, number, row)
        if doc.row_id in self.first_row:
            raise SourceLoadingError(
                f"source {source.name!r}: row {number} repeats the id of row {self.first_row[doc.row_id]}"
            )
        self.first_row[doc.row_id] = number
        self.documents[doc.row_id] = doc
        if doc.updated_at is not None:
            mark = Watermark.of(doc.updated_at)
            self.watermark = (
                mark if self.watermark is None else self.watermark.later(mark, source.name, number)
            )


@dataclass(frozen=True)
class _Plan:
    """Which position plays which role, and which labels become metadata."""

    roles: dict[str, int]
    metadata: tuple[tuple[int, str], ...]

    @classmethod
    def build(cls, source: SqlSource, labels: Sequence[str]) -> _Plan:
        name = source.name
        counts = Counter(label.lower() for label in labels)
        twice = sorted(label for label, n in counts.items() if n > 1)
        if twice:
            raise ConfigurationError(
                f"source {name!r}: the query returns more than one column labelled {twice[0]!r} "
                "(case ignored); "
                f"give each column its own alias",
                key=f"sources.{name}.query",
            )
        position = {label.lower(): i for i, label in enumerate(labels)}
        roles: dict[str, int] = {}
        for role, column in source.columns.items():
            index = position.get(column.lower())
            if index is None:
                if role == "title" and not source.explicit_title:
                    continue
                raise ConfigurationError(
                    f"source {name!r}: the query has no column {column!r} ({ROLE_OPTIONS[role]}); "
                    f"its columns are: {', '.join(labels)}",
                    key=f"sources.{name}.{ROLE_OPTIONS[role]}",
                )
            roles[role] = index
        if source.group_column is not None:
            index = position.get(source.group_column.lower())
            if index is None:
                raise ConfigurationError(
                    f"source {name!r}: the query has no column {source.group_column!r} (group_column); "
                    f"its columns are: {', '.join(labels)}",
                    key=f"sources.{name}.group_column",
                )
            if index in roles.values():
                raise ConfigurationError(
                    f"source {name!r}: group_column {source.group_column!r} already plays another role",
                    key=f"sources.{name}.group_column",
                )
            roles["group"] = index
        # A column that plays a role is not metadata, except a group_column also declared a facet
        # (QA D-3: "per team" read none on every row): it stays metadata so the facet reads it,
        # and, being hashed with the facets, a change of it rewrites the chunk as any facet does.
        facet_labels = {label.lower() for label in source.facet_columns}
        skip = {i for role, i in roles.items() if role != "group" or labels[i].lower() not in facet_labels}
        for label in source.facet_columns:
            if label.lower() not in position:
                raise ConfigurationError(
                    f"source {name!r}: the query has no column {label!r} (facet_columns); its columns are: "
                    f"{', '.join(labels)}",
                    key=f"sources.{name}.facet_columns",
                )
        for label in source.sql_meanings.person_columns:
            if label not in position:
                raise ConfigurationError(
                    f"source {name!r}: the query has no column {label!r} (person_facets); its columns are: "
                    f"{', '.join(labels)}",
                    key=f"sources.{name}.person_facets",
                )
        reserved = source.reserved_metadata()
        metadata = []
        for i, label in enumerate(labels):
            if i in skip:
                continue
            if label.lower() in reserved:
                raise ConfigurationError(
                    f"source {name!r}: column {label!r} would overwrite metadata the product sets "
                    f"({', '.join(reserved)}); give it another alias",
                    key=f"sources.{name}.query",
                )
            metadata.append((i, label))
        return cls(roles, tuple(metadata))

    def document(self, source: SqlSource, number: int, row: Sequence[Any]) -> SqlDocument:
        name = source.name
        row_id = _row_id(source, row[self.roles["id"]], number)
        document_id = source.document_id(row_id)
        content_value = read_lob(row[self.roles["content"]])
        if content_value is None:
            raise SourceLoadingError(f"source {name!r}: row {number} has a NULL content")
        content = _text(content_value, source, number, "content")
        title = None
        if "title" in self.roles:
            raw_title = read_lob(row[self.roles["title"]])
            if raw_title is not None:
                title = " ".join(_text(raw_title, source, number, "title").split()) or None
        owner = _owner(source, row[self.roles["owner"]], number) if "owner" in self.roles else None
        metadata: dict[str, Any] = {"source": name, "document_id": document_id, "id": row_id}
        if title is not None:
            metadata["title"] = title
        if owner is not None:
            metadata["owner_id"] = owner
        updated_at = None
        if "updated_at" in self.roles:
            updated_at = _timestamp(source, row[self.roles["updated_at"]], number)
            metadata["updated_at"] = updated_at.isoformat() if not isinstance(updated_at, str) else updated_at
        for index, label in self.metadata:
            value = read_lob(row[index])
            if value is not None:
                metadata[label] = _jsonable(value, source, number, label)
        by_label = {k.lower(): v for k, v in metadata.items()}
        facets = {
            label.lower(): _facet_value(kind, by_label.get(label.lower()))
            for label, kind in source.facet_columns.items()
        }
        for person in source.sql_meanings.person_columns:
            raw = (
                owner
                if source.owner_column and person == source.owner_column.lower()
                else by_label.get(person)
            )
            facets[person] = _person_value(raw)
        hashed: dict[str, Any] = {"content": content, "metadata": metadata}
        if facets:  # declaring facets rewrites the chunks that lack them
            hashed["facets"] = facets
        digest = hashlib.sha256(
            json.dumps(hashed, sort_keys=True, ensure_ascii=False).encode("utf-8")
        ).hexdigest()
        groups: tuple[str, ...] = ()
        if "group" in self.roles:
            raw_group = read_lob(row[self.roles["group"]])
            if raw_group is not None:
                try:
                    groups = (check_group(raw_group),)
                except InputError as exc:
                    raise SourceLoadingError(
                        f"source {name!r}: row {number}: {source.group_column!r} "
                        f"(group_column): {exc.message}"
                    ) from None
        return SqlDocument(
            row_id, document_id, title, content, owner, metadata, digest, updated_at, facets, groups
        )


def _text(value: Any, source: SqlSource, number: int, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        raise SourceLoadingError(f"source {source.name!r}: row {number}: the {what} column holds binary data")
    return str(value)


def _row_id(source: SqlSource, value: Any, number: int) -> str:
    value = read_lob(value)
    if value is None:
        raise SourceLoadingError(f"source {source.name!r}: row {number} has a NULL id")
    if isinstance(value, bool) or isinstance(value, bytes | bytearray | memoryview):
        raise SourceLoadingError(
            f"source {source.name!r}: row {number} has an id that is not text or a number"
        )
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, Decimal) and value == value.to_integral_value():
        value = int(value)
    text = str(value)
    if not text.strip():
        raise SourceLoadingError(f"source {source.name!r}: row {number} has a blank id")
    if len(source.document_id(text)) > MAX_DOCUMENT_ID:
        raise SourceLoadingError(
            f"source {source.name!r}: row {number} has an id too long for a document id "
            f"({MAX_DOCUMENT_ID} characters with the source name)"
        )
    return text


def _owner(source: SqlSource, value: Any, number: int) -> int | None:
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise ValueError
        if isinstance(value, float | Decimal):
            if value != int(value):
                raise ValueError
            return int(value)
        return int(value)  # int, or text holding an integer
    except (TypeError, ValueError):
        raise SourceLoadingError(
            f"source {source.name!r}: row {number}: {source.owner_column!r} (owner_column) "
            f"is not an integer employee id"
        ) from None


def _timestamp(source: SqlSource, value: Any, number: int) -> Any:
    col = source.updated_at_column
    if value is None:
        raise SourceLoadingError(
            f"source {source.name!r}: row {number} has a NULL {col!r} (updated_at_column)"
        )
    if isinstance(value, dt.datetime | dt.date):
        return value
    if isinstance(value, str):
        try:
            dt.datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            if len(value) <= 64:
                return value
    raise SourceLoadingError(
        f"source {source.name!r}: row {number}: {col!r} (updated_at_column) is not a timestamp"
    )


def _jsonable(value: Any, source: SqlSource, number: int, label: str) -> Any:
    if isinstance(value, str | bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            return str(value)
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, bytes | bytearray | memoryview):
        raise SourceLoadingError(
            f"source {source.name!r}: row {number}: column {label!r} holds binary data, "
            f"which cannot be metadata; leave it out of the SELECT or convert it"
        )
    return str(value)


# -- the incremental watermark ------------------------------------------------------------
@dataclass(frozen=True)
class Watermark:
    """The latest updated-at value seen, kept in the form the source returned it.

    A text timestamp (SQLite) is bound back as the same text, so the
    source's own comparison applies; a datetime or date is bound back as one.
    """

    kind: str  # datetime | date | text
    text: str

    @classmethod
    def of(cls, value: Any) -> Watermark:
        if isinstance(value, dt.datetime):
            return cls("datetime", value.isoformat())
        if isinstance(value, dt.date):
            return cls("date", value.isoformat())
        return cls("text", str(value))

    def moment(self) -> dt.datetime:
        if self.kind == "date":
            return dt.datetime.combine(dt.date.fromisoformat(self.text), dt.time())
        return dt.datetime.fromisoformat(self.text.strip())

    def bind_value(self) -> Any:
        if self.kind == "datetime":
            return dt.datetime.fromisoformat(self.text)
        if self.kind == "date":
            return dt.date.fromisoformat(self.text)
        return self.text

    def oracle_bind(self) -> tuple[str, Any]:
        """(delta template, bind value) for an Oracle source: timestamps as text, aware ones in UTC."""
        if self.kind == "text":
            return q.DELTA_TEMPLATE, self.text
        moment = self.moment()
        if moment.tzinfo is not None:
            utc = moment.astimezone(dt.UTC)
            return q.ORACLE_DELTA_TZ_TEMPLATE, utc.isoformat(timespec="microseconds")
        return q.ORACLE_DELTA_NAIVE_TEMPLATE, moment.isoformat(timespec="microseconds")

    def later(self, other: Watermark, source: str, number: int) -> Watermark:
        try:
            return other if other.moment() > self.moment() else self
        except TypeError:
            raise SourceLoadingError(
                f"source {source!r}: row {number}: updated_at values mix time zone-aware and naive timestamps"
            ) from None


# -- configuration ------------------------------------------------------------------------
def load_sql_sources(settings: Any) -> list[SqlSource]:
    """The ``[sources.NAME]`` tables of ``settings`` (or a mapping of them) as validated sources."""
    tables = getattr(settings, "sources", settings) or {}
    out: list[SqlSource] = []
    seen: dict[str, str] = {}
    for name, table in tables.items():
        if not isinstance(table, Mapping):
            raise ConfigurationError(f"sources.{name}: expected a table of options", key=f"sources.{name}")
        options = dict(table)
        if "query" not in options:
            raise ConfigurationError(f"sources.{name}: query is required", key=f"sources.{name}.query")
        query = options.pop("query")
        connection = options.pop("connection", None)
        source = SqlSource(str(name), query, connection, **options)
        if name.lower() in seen:
            raise ConfigurationError(
                f"sources: {seen[name.lower()]!r} and {name!r} differ only in case", key=f"sources.{name}"
            )
        seen[name.lower()] = name
        out.append(source)
    return out
