"""SQL-query sources: declaration, validation, query safety, durations and connection bindings.

No embedding model and no product database here: these are the checks that
run before anything is read.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
import sqlean

from oracle_rag.config import load_settings
from oracle_rag.errors import ConfigurationError
from oracle_rag.sources import SqlSource, bind_connection, load_sql_sources
from oracle_rag.sources.access import ACCESS_OPTIONS
from oracle_rag.sources.connections import URL_OPTIONS, ConnectionResolver, bound_engine
from oracle_rag.sources.durations import format_seconds, parse_duration
from oracle_rag.sources.options import Option, options_table
from oracle_rag.sources.sql_meanings import MEANING_KEYS, MEANING_OPTIONS
from oracle_rag.sources.sql_query import OPTION_KEYS, SOURCE_OPTIONS, SQL_SOURCE_OPTIONS, check_query

QUERY = "SELECT account_id AS id, notes AS content, account_name AS title, owner_id FROM accounts"


def _refused(match: str, *args, **kwargs) -> ConfigurationError:
    with pytest.raises(ConfigurationError, match=match) as info:
        SqlSource(*args, **kwargs)
    return info.value


# -- durations ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("10m", 600),
        ("1h", 3600),
        ("PT30S", 30),
        ("pt1h30m", 5400),
        ("P1D", 86400),
        ("P1DT12H", 129600),
        ("P2W", 14 * 86400),
        ("1h30m", 5400),
        ("500ms", 0.5),
        (45, 45),
        ("2.5", 2.5),
        ("PT0.5S", 0.5),
    ],
)
def test_duration_spellings(text, seconds) -> None:
    assert parse_duration(text, key="k") == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "ten minutes", "P1M", "P1Y", "PT", "P", "P1DT", "-5s", "5 parsecs", True, None]
)
def test_bad_durations_name_the_key(text) -> None:
    with pytest.raises(ConfigurationError) as info:
        parse_duration(text, key="sources.x.refresh")
    assert info.value.details["key"] == "sources.x.refresh"
    assert "sources.x.refresh" in str(info.value)


def test_format_seconds() -> None:
    assert [format_seconds(s) for s in (30, 600, 3600, 5400, 1.5)] == ["30s", "10m", "1h", "1h30m", "1.5s"]


# -- declaring a source ---------------------------------------------------------------------
def test_toml_declaration_becomes_sources(tmp_path: Path) -> None:
    cfg = tmp_path / "oracle-rag.toml"
    cfg.write_text(
        "[sources.crm-accounts]\n"
        f'query = "{QUERY}"\n'
        'connection = "crm"\n'
        'refresh = "10m"\n'
        'updated_at_column = "updated_at"\n'
        'owner_column = "owner_id"\n'
        '\n[sources.wiki]\nquery = "SELECT page_id AS id, body AS content FROM pages;"\n'
    )
    settings = load_settings(env={}, config_file=cfg)
    crm, wiki = load_sql_sources(settings)
    assert (crm.name, crm.connection, crm.refresh_s, crm.owner_column, crm.updated_at_column) == (
        "crm-accounts",
        "crm",
        600.0,
        "owner_id",
        "updated_at",
    )
    assert (crm.timeout_s, crm.max_rows, crm.fetch_size) == (30.0, 10_000, 500)
    assert crm.columns == {
        "id": "id",
        "content": "content",
        "title": "title",
        "owner": "owner_id",
        "updated_at": "updated_at",
    }
    assert wiki.connection == "rag" and wiki.refresh_s is None
    assert wiki.query == "SELECT page_id AS id, body AS content FROM pages"  # trailing ';' dropped


def test_python_api_matches_toml() -> None:
    src = SqlSource(
        "crm-accounts",
        QUERY,
        connection="crm",
        refresh="PT10M",
        statement_timeout="1h",
        max_rows=1_000_000,
        fetch_size="10000",
    )
    assert (src.refresh_s, src.timeout_s, src.max_rows, src.fetch_size) == (600.0, 3600.0, 1_000_000, 10_000)


def test_query_is_required_and_names_the_source() -> None:
    with pytest.raises(ConfigurationError, match=r"sources\.tickets: query is required"):
        load_sql_sources({"tickets": {"connection": "crm"}})


def test_unknown_option_names_key_and_accepted_ones() -> None:
    err = _refused("unknown option 'refesh'", "crm", QUERY, refesh="10m")
    for accepted in ("refresh", "statement_timeout", "max_rows", "fetch_size", "owner_column", "url"):
        assert accepted in str(err)
    assert "10m" not in str(err)


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"statement_timeout": "0.5s"}, "statement_timeout"),
        ({"statement_timeout": "2h"}, "statement_timeout"),
        ({"max_rows": 0}, "max_rows"),
        ({"max_rows": 1_000_001}, "max_rows"),
        ({"max_rows": True}, "max_rows"),
        ({"fetch_size": 10_001}, "fetch_size"),
        ({"fetch_size": "many"}, "fetch_size"),
        ({"refresh": "0s"}, "refresh"),
        ({"refresh": "P60D"}, "refresh"),
    ],
)
def test_ranges(options, key) -> None:
    err = _refused(key, "crm", QUERY, **options)
    assert err.details["key"] == f"sources.crm.{key}"


def test_range_edges_are_accepted() -> None:
    low = SqlSource("a", QUERY, statement_timeout="1s", max_rows=1, fetch_size=1, refresh="1s")
    high = SqlSource(
        "b", QUERY, statement_timeout="PT1H", max_rows=1_000_000, fetch_size=10_000, refresh="P30D"
    )
    assert (low.timeout_s, low.max_rows, low.fetch_size) == (1.0, 1, 1)
    assert (high.timeout_s, high.max_rows, high.fetch_size) == (3600.0, 1_000_000, 10_000)


@pytest.mark.parametrize("name", ["", "1abc", "a#b", "a b", "x" * 65, "task", "Sprint"])
def test_bad_source_names(name) -> None:
    with pytest.raises(ConfigurationError):
        SqlSource(name, QUERY)


def test_names_differing_only_in_case_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="differ only in case"):
        load_sql_sources({"crm": {"query": QUERY}, "CRM": {"query": QUERY}})


# -- roles ----------------------------------------------------------------------------------
def test_configurable_role_columns_case_insensitive_identity() -> None:
    src = SqlSource("crm", QUERY, id_column="Account_ID", content_column="NOTES", title_column="name")
    assert src.columns["id"] == "Account_ID" and src.columns["content"] == "NOTES"


@pytest.mark.parametrize(
    "options",
    [
        {"id_column": "x", "content_column": "X"},
        {"owner_column": "Content"},
        {"title_column": "id"},
        {"updated_at_column": "owner", "owner_column": "owner"},
    ],
)
def test_one_column_cannot_play_two_roles(options) -> None:
    _refused("used as two roles", "crm", QUERY, **options)


@pytest.mark.parametrize("key", ["content_column", "owner_column", "updated_at_column"])
def test_default_title_yields_to_an_explicit_role(key) -> None:
    src = SqlSource("crm", QUERY, **{key: "Title"})
    assert src.columns[key.removesuffix("_column")] == "Title" and "title" not in src.columns


@pytest.mark.parametrize(
    "options",
    [
        {"updated_at_column": "updated at"},
        {"updated_at_column": "u", "id_column": "a.id"},
        {"updated_at_column": 'x"; DROP TABLE t; --'},
    ],
)
def test_incremental_columns_must_be_plain_identifiers(options) -> None:
    _refused("plain identifier", "crm", QUERY, **options)


def test_reserved_metadata_set() -> None:
    plain = SqlSource("a", QUERY)
    assert plain.reserved_metadata() == ("source", "document_id", "id", "title")
    full = SqlSource("b", QUERY, owner_column="owner_id", updated_at_column="updated_at")
    assert full.reserved_metadata() == ("source", "document_id", "id", "title", "owner_id", "updated_at")


# -- query safety ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("SELECT 1 AS id, 'a' AS content", "SELECT 1 AS id, 'a' AS content"),
        ("select 1 as id, 'a' as content;", "select 1 as id, 'a' as content"),
        (
            "  \n\tWITH x AS (SELECT 1 AS id) SELECT id, 'c' AS content FROM x ;  \n",
            "WITH x AS (SELECT 1 AS id) SELECT id, 'c' AS content FROM x",
        ),
        (
            "-- header comment\n/* block; comment */ SELECT 1 AS id, 'a;b' AS content",
            "SELECT 1 AS id, 'a;b' AS content",
        ),
        ("SELECT 1 AS id, '10:30 :x' AS content; -- trailing", "SELECT 1 AS id, '10:30 :x' AS content"),
        ("SELECT id, body::text AS content FROM t", "SELECT id, body::text AS content FROM t"),
        (
            "SELECT id, content FROM t WHERE note LIKE '%s%'",
            "SELECT id, content FROM t WHERE note LIKE '%s%'",
        ),
    ],
)
def test_accepted_queries(query, expected) -> None:
    assert check_query(query) == expected


@pytest.mark.parametrize(
    ("query", "why"),
    [
        ("DELETE FROM accounts", "must start with SELECT or WITH"),
        ("UPDATE t SET a = 1", "must start with SELECT or WITH"),
        ("-- SELECT\nDROP TABLE t", "must start with SELECT or WITH"),
        ("SELECTED FROM t", "must start with SELECT or WITH"),
        ("(SELECT 1 AS id)", "must start with SELECT or WITH"),
        ("SELECT 1; DELETE FROM t", "one statement only"),
        ("SELECT 1;;", "one statement only"),
        ("SELECT 1 AS id; SELECT 2", "one statement only"),
        ("SELECT * FROM t WHERE owner = ${user}", r"placeholders \(\$\{"),
        ("SELECT '${x}' AS id", r"placeholders \(\$\{"),
        ("SELECT * FROM t WHERE id = :id", "bind placeholders"),
        ("SELECT * FROM t WHERE id = %s", "placeholders"),
        ("SELECT * FROM t WHERE id = %(id)s", "placeholders"),
        ("", "SELECT statement is required"),
        ("   ", "SELECT statement is required"),
    ],
)
def test_refused_queries(query, why) -> None:
    with pytest.raises(ConfigurationError, match=why):
        check_query(query)


def test_wrappers_are_derived_tables() -> None:
    src = SqlSource(
        "crm", "SELECT a AS id, b AS content, ts AS updated_at FROM t -- note", updated_at_column="updated_at"
    )
    assert src.delta_sql() == (
        "SELECT * FROM (\nSELECT a AS id, b AS content, ts AS updated_at FROM t -- note\n) src "
        "WHERE src.updated_at >= :watermark"
    )
    assert (
        src.ids_sql()
        == "SELECT src.id FROM (\nSELECT a AS id, b AS content, ts AS updated_at FROM t -- note\n) src"
    )


# -- secrets ----------------------------------------------------------------------------------
def test_password_option_is_refused_without_echo() -> None:
    err = _refused(
        "password_env",
        "crm",
        QUERY,
        connection="crm",
        url="oracle+oracledb://h/?service_name=S",
        password="hunter2",
    )
    assert "hunter2" not in str(err)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://scott:tiger@db.example.com/crm",
        "oracle+oracledb://scott/tiger@db:1521/?service_name=CRM",
        "mysql://db/crm?password=tiger",
        "postgresql://scott:%74iger@db/crm",
    ],
)
def test_urls_with_secrets_are_refused(url) -> None:
    err = _refused("carries a password", "crm", QUERY, connection="crm", url=url, password_env="CRM_PW")
    assert "tiger" not in str(err) and "%74" not in str(err)
    assert err.details["key"] == "sources.crm.url"


def test_repr_names_keys_never_values() -> None:
    src = SqlSource(
        "crm",
        QUERY,
        connection="crm",
        url="postgresql://db.internal.example/crm",
        user="svc_reader",
        password_env="CRM_DB_PASSWORD",
        owner_column="owner_id",
    )
    shown = repr(src)
    assert shown == (
        "SqlSource('crm', options=['connection', 'owner_column', 'password_env', 'query', 'url', 'user'])"
    )
    for value in ("db.internal.example", "svc_reader", "CRM_DB_PASSWORD", "accounts", "owner_id'"):
        assert value not in shown
    assert str(src) == shown


def test_url_options_need_a_connection_other_than_rag() -> None:
    _refused("other than 'rag'", "crm", QUERY, connection="rag", url="sqlite:///x.db")
    _refused("without url", "crm", QUERY, connection="crm", user="reader")
    _refused("not a SQLAlchemy URL", "crm", QUERY, connection="crm", url="no scheme here")
    _refused(
        "environment variable name",
        "crm",
        QUERY,
        connection="crm",
        url="sqlite:///x.db",
        password_env="not a name",
    )


# -- connections ----------------------------------------------------------------------------
@pytest.fixture
def sqlite_engine(tmp_path: Path):
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'ext.db'}", module=sqlean)
    yield engine
    engine.dispose()


def test_bind_connection_lifecycle(sqlite_engine) -> None:
    with bind_connection("crm", sqlite_engine) as binding:
        assert bound_engine("crm") is sqlite_engine
        with pytest.raises(ConfigurationError, match="already bound"):
            bind_connection("crm", sqlite_engine)
    assert bound_engine("crm") is None and binding.closed
    binding.close()  # closing twice is a no-op
    newer = bind_connection("crm", sqlite_engine)
    try:
        binding.close()  # a stale binding never unbinds the newer one
        assert bound_engine("crm") is sqlite_engine
    finally:
        newer.close()
    assert bound_engine("crm") is None


def test_bind_refuses_reserved_name_and_non_engines(sqlite_engine) -> None:
    with pytest.raises(ConfigurationError, match="reserved"):
        bind_connection("rag", sqlite_engine)
    with pytest.raises(ConfigurationError, match="SQLAlchemy Engine"):
        bind_connection("crm", "sqlite:///x.db")
    with pytest.raises(ConfigurationError, match="connection name"):
        bind_connection("bad name", sqlite_engine)


def test_bound_connection_wins_over_url_with_warning(sqlite_engine, caplog) -> None:
    src = SqlSource(
        "crm",
        QUERY,
        connection="crm",
        url="postgresql://db.internal.example/crm",
        user="svc_reader",
        password_env="CRM_DB_PASSWORD",
    )
    resolver = ConnectionResolver()
    with bind_connection("crm", sqlite_engine), caplog.at_level(logging.WARNING):
        assert resolver.engine_for(src.name, src.connection, src.url_options) is sqlite_engine
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert "url" in warning and "user" in warning and "password_env" in warning
    for value in ("db.internal.example", "svc_reader", "CRM_DB_PASSWORD"):
        assert value not in warning


def test_unresolvable_connection_names_the_source() -> None:
    src = SqlSource("crm-accounts", QUERY, connection="crm")
    with pytest.raises(ConfigurationError, match="source 'crm-accounts'.*connection 'crm'"):
        ConnectionResolver().engine_for(src.name, src.connection, src.url_options)


def test_url_engines_use_sqlean_and_the_password_env(tmp_path: Path, monkeypatch) -> None:
    src = SqlSource("files", QUERY, connection="files", url=f"sqlite:///{tmp_path / 'f.db'}")
    resolver = ConnectionResolver()
    try:
        engine = resolver.engine_for(src.name, src.connection, src.url_options)
        assert engine.dialect.dbapi is sqlean or engine.dialect.loaded_dbapi is sqlean
        assert resolver.engine_for(src.name, src.connection, src.url_options) is engine  # cached
    finally:
        resolver.close()
    secret = SqlSource(
        "pg",
        QUERY,
        connection="pg",
        url="postgresql+psycopg2://db.example/crm",
        user="reader",
        password_env="PG_TEST_PASSWORD_UNSET",
    )
    monkeypatch.delenv("PG_TEST_PASSWORD_UNSET", raising=False)
    with pytest.raises(ConfigurationError, match="PG_TEST_PASSWORD_UNSET is not set"):
        ConnectionResolver().engine_for(secret.name, secret.connection, secret.url_options)


def test_url_without_connection_reads_through_a_connection_named_after_the_source(tmp_path: Path) -> None:
    """`url` alone is enough; the connection takes the source's name."""
    db = tmp_path / "crm.db"
    with sa.create_engine(f"sqlite:///{db}", module=sqlean).begin() as conn:
        conn.execute(
            sa.text("CREATE TABLE accounts (account_id INTEGER, notes TEXT, account_name TEXT, owner_id INT)")
        )
        conn.execute(sa.text("INSERT INTO accounts VALUES (7, 'renewal due', 'Acme', 3)"))
    settings = load_settings(env={}, sources={"crm": {"query": QUERY, "url": f"sqlite:///{db}"}})
    (src,) = load_sql_sources(settings)
    assert src.connection == "crm"
    resolver = ConnectionResolver()
    try:
        engine = resolver.engine_for(src.name, src.connection, src.url_options)
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT account_name FROM accounts")).scalar_one() == "Acme"
    finally:
        resolver.close()


def test_rag_connection_is_the_products_own_engine(sqlite_engine) -> None:
    src = SqlSource("own", QUERY)
    assert src.connection == "rag"
    assert ConnectionResolver(sqlite_engine).engine_for(src.name, src.connection, None) is sqlite_engine


MEANING_BASE = {"facet_columns": {"severity": "enum", "state": "enum", "due": "date"}}


@pytest.mark.parametrize("option", MEANING_OPTIONS, ids=lambda o: o.key)
def test_each_meaning_option_refuses_a_value_past_its_bounds_naming_its_key(option: Option) -> None:
    """The schema's bounds are what the source enforces: one past the limit, and the wrong shape."""
    too_many: object = [f"w{i}" for i in range(option.limit + 1)]
    if option.shape.endswith("table"):
        too_many = {f"k{i}": ["w"] for i in range(option.limit + 1)}
    for value in (too_many, 42):
        _refused(rf"sources\.t\.{option.key}", "t", QUERY, **MEANING_BASE, **{option.key: value})


def test_meaning_options_within_bounds_are_read() -> None:
    source = SqlSource(
        "t",
        QUERY,
        **MEANING_BASE,
        words=["w"] * 64,
        person_facets=["owner_id"],
        lifecycle="State",
        done_values=["DONE"],
        due_facet="due",
        facet_cues={"Severity": ["sev"]},
        display=["severity", "owner_id"],
        value_words={"DONE": ["hecho"]},
        nouns_es=["caso", "casos"],
        labels_es={"state": " estado "},
    )
    m = source.meanings
    assert (m.lifecycle, m.done, m.due, m.display, m.labels_es) == (
        "state",
        ("DONE",),
        "due",
        ("severity", "owner_id"),
        {"state": "estado"},
    )
    assert source.sql_meanings.cues == {"severity": ("sev",)}
    assert m.nouns["es"] == ("caso", "casos") and m.words[-2:] == ("caso", "casos")


def test_the_documented_meaning_options_are_the_schema() -> None:
    """docs/sql-sources.md's table of meaning options lists the schema's keys, in its order."""
    text = (Path(__file__).parent.parent / "docs" / "sql-sources.md").read_text()
    table = text.split("| option | default | meaning |", 1)[1].split("\n\n", 1)[0]
    keys = [
        key for row in table.strip().splitlines()[1:] for key in re.findall(r"`(\w+)`", row.split("|")[1])
    ]
    assert keys == list(MEANING_KEYS)


# -- the declared schema of every option ---------------------------------------------------
@pytest.mark.parametrize("option", SQL_SOURCE_OPTIONS, ids=lambda o: o.key)
def test_every_option_refuses_a_value_of_no_shape_naming_its_key(option: Option) -> None:
    """The schema reads every option: a value that fits no shape is refused with its key, whatever else
    the table says (the shape is checked before what combines options)."""
    nothing = object()
    if option.key == "query":
        err = _refused(r"^CONFIGURATION: sources\.t\.query: ", "t", nothing)
    elif option.key == "connection":
        err = _refused(r"^CONFIGURATION: sources\.t\.connection: ", "t", QUERY, nothing)
    else:
        err = _refused(rf"^CONFIGURATION: sources\.t\.{option.key}[.:]", "t", QUERY, **{option.key: nothing})
    assert err.details["key"] == f"sources.t.{option.key}"


def test_the_schema_names_each_accepted_key_once() -> None:
    assert len(set(OPTION_KEYS)) == len(OPTION_KEYS)
    assert OPTION_KEYS == tuple(
        o.key for o in (*SOURCE_OPTIONS, *URL_OPTIONS, *MEANING_OPTIONS, *ACCESS_OPTIONS)
    )
    err = _refused("unknown option", "t", QUERY, nope=1)
    assert str(err).endswith(f"accepted: {', '.join(OPTION_KEYS)}")


def test_declared_defaults_are_the_values_read() -> None:
    source = SqlSource("t", QUERY)
    read = {
        "statement_timeout": source.timeout_s,
        "max_rows": source.max_rows,
        "fetch_size": source.fetch_size,
    }
    assert read == {o.key: o.default for o in SOURCE_OPTIONS if o.default is not None}


@pytest.mark.parametrize(
    ("schema", "what"),
    [((*SOURCE_OPTIONS, *URL_OPTIONS), "the source options"), (ACCESS_OPTIONS, "the access options")],
)
def test_the_documented_option_tables_are_generated_from_the_schema(schema, what) -> None:
    """docs/sql-sources.md shows ``options_table`` of each schema verbatim: defaults and bounds as enforced."""
    text = (Path(__file__).parent.parent / "docs" / "sql-sources.md").read_text()
    table = options_table(schema)
    assert table in text, f"docs/sql-sources.md: {what} table differs from the schema; it should be:\n{table}"
