"""SQL-query sources: reading rows into documents, safely, from a real external SQLite file.

No embedding model here: these tests read through ``read_session`` and
``SqlSource.read`` exactly as a refresh does, and check the documents, the
refusals and the state of the connection afterwards.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
import sqlean

from oracle_rag.errors import ConfigurationError, DatabaseError, SourceLoadingError
from oracle_rag.sources import SqlSource
from oracle_rag.sources.connections import StatementTimeout, read_session
from oracle_rag.sources.sql_query import ReadResult, Watermark

SECRET = "SECRET-VALUE-7f3a"


@pytest.fixture
def ext(tmp_path: Path) -> Iterator[sa.Engine]:
    """An external SQLite file with one pooled connection (so state left behind would show)."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'crm.db'}", module=sqlean, pool_size=1, max_overflow=0)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE accounts (account_id INTEGER PRIMARY KEY, account_name TEXT, notes TEXT, "
            "owner_id INTEGER, region TEXT, revenue REAL, updated_at TEXT)"
        )
        conn.exec_driver_sql(
            "INSERT INTO accounts VALUES "
            "(1, 'Acme', 'Renewal due in March', 11, 'EMEA', 1200.5, '2026-01-01T10:00:00'), "
            "(2, 'Globex', 'Asked for a discount', NULL, NULL, NULL, '2026-01-02T10:00:00'), "
            "(3, NULL, '', 12, 'APAC', 99, '2026-01-03T10:00:00')"
        )
    yield engine
    engine.dispose()


def _read(engine: sa.Engine, source: SqlSource, watermark: Watermark | None = None) -> ReadResult:
    with read_session(engine, source=source.name, timeout_s=source.timeout_s) as conn:
        return source.read(conn, watermark=watermark)


def _query_only(engine: sa.Engine) -> int:
    with engine.connect() as conn:
        return int(conn.exec_driver_sql("PRAGMA query_only").scalar_one())


# -- rows to documents ----------------------------------------------------------------------------
def test_rows_become_documents(ext) -> None:
    src = SqlSource(
        "crm-accounts",
        "SELECT account_id AS ID, notes AS Content, account_name AS TITLE, owner_id, "
        "region, revenue FROM accounts ORDER BY account_id",
        connection="crm",
        owner_column="OWNER_ID",
    )
    result = _read(ext, src)
    assert result.count == result.rows_read == 3  # one document per row, never split
    acme, globex, third = (result.documents[i] for i in ("1", "2", "3"))
    assert acme.document_id == "crm-accounts#1"
    assert acme.chunk_text == "Acme\nRenewal due in March"
    assert acme.owner_id == 11 and globex.owner_id is None
    # other columns are metadata under the driver's label; NULLs are left out
    assert acme.metadata == {
        "source": "crm-accounts",
        "document_id": "crm-accounts#1",
        "id": "1",
        "title": "Acme",
        "owner_id": 11,
        "region": "EMEA",
        "revenue": 1200.5,
    }
    assert globex.metadata == {
        "source": "crm-accounts",
        "document_id": "crm-accounts#2",
        "id": "2",
        "title": "Globex",
    }
    # empty content is accepted; without a title, the chunk text is the document id (never empty)
    assert third.content == "" and third.title is None and third.chunk_text == "crm-accounts#3"
    assert len({d.doc_hash for d in result.documents.values()}) == 3
    assert _read(ext, src).documents["1"].doc_hash == acme.doc_hash  # stable


def test_chunk_text_without_title_is_the_content(ext) -> None:
    src = SqlSource("notes", "SELECT account_id AS id, notes AS content FROM accounts")
    assert _read(ext, src).documents["2"].chunk_text == "Asked for a discount"


def test_configured_column_names_match_ignoring_case(ext) -> None:
    src = SqlSource(
        "crm",
        "SELECT account_id, notes, account_name FROM accounts",
        id_column="ACCOUNT_ID",
        content_column="Notes",
        title_column="account_NAME",
    )
    docs = _read(ext, src).documents
    assert docs["1"].chunk_text == "Acme\nRenewal due in March"
    assert set(docs["1"].metadata) == {"source", "document_id", "id", "title"}


def test_long_content_is_one_document(ext) -> None:
    with ext.begin() as conn:
        conn.execute(sa.text("UPDATE accounts SET notes = :n WHERE account_id = 1"), {"n": "word " * 5000})
    docs = _read(ext, SqlSource("crm", "SELECT account_id AS id, notes AS content FROM accounts")).documents
    assert len(docs) == 3 and docs["1"].content == "word " * 5000


def test_colons_in_literals_survive(ext) -> None:
    src = SqlSource(
        "c", "SELECT account_id AS id, 'met at 10:30 :x' AS content FROM accounts WHERE account_id = 1"
    )
    assert _read(ext, src).documents["1"].content == "met at 10:30 :x"


def test_missing_role_column_lists_the_columns(ext) -> None:
    src = SqlSource("crm", "SELECT account_id, notes AS content FROM accounts")
    with pytest.raises(
        ConfigurationError, match=r"no column 'id' \(id_column\); its columns are: account_id, content"
    ):
        _read(ext, src)
    explicit = SqlSource(
        "crm", "SELECT account_id AS id, notes AS content FROM accounts", title_column="name"
    )
    with pytest.raises(ConfigurationError, match="title_column"):
        _read(ext, explicit)


def test_duplicate_labels_are_refused(ext) -> None:
    src = SqlSource(
        "crm", "SELECT account_id AS id, notes AS content, region AS r, owner_id AS R FROM accounts"
    )
    with pytest.raises(ConfigurationError, match="more than one column labelled 'r'"):
        _read(ext, src)


@pytest.mark.parametrize(
    ("query", "options", "label"),
    [
        ("SELECT account_id AS id, notes AS content, region AS source FROM accounts", {}, "source"),
        ("SELECT account_id AS id, notes AS content, region AS Document_ID FROM accounts", {}, "Document_ID"),
        (
            "SELECT account_id, notes AS content, region AS id FROM accounts",
            {"id_column": "account_id"},
            "id",
        ),
        (
            "SELECT account_id AS id, notes AS content, owner_id, region AS owner_id2, 1 AS OWNER_ID_X, "
            "updated_at AS modified, 'x' AS updated_at FROM accounts",
            {"updated_at_column": "modified"},
            "updated_at",
        ),
        (
            "SELECT account_id AS id, notes AS content, owner_id AS o, region AS owner_id FROM accounts",
            {"owner_column": "o"},
            "owner_id",
        ),
    ],
)
def test_columns_overwriting_product_metadata_are_refused(ext, query, options, label) -> None:
    with pytest.raises(ConfigurationError, match=f"column '{label}' would overwrite metadata"):
        _read(ext, SqlSource("crm", query, **options))


def test_updated_at_and_owner_labels_are_ordinary_metadata_without_those_roles(ext) -> None:
    src = SqlSource("crm", "SELECT account_id AS id, notes AS content, owner_id, updated_at FROM accounts")
    doc = _read(ext, src).documents["1"]
    assert doc.metadata["owner_id"] == 11 and doc.metadata["updated_at"] == "2026-01-01T10:00:00"
    assert doc.owner_id is None  # no owner_column: the document is visible to everyone


# -- bad rows fail the whole source, named by row number only ------------------------------------
@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([(1, "a"), (None, "b")], "row 2 has a NULL id"),
        ([(1, "a"), ("   ", "b")], "row 2 has a blank id"),
        ([(1, "a"), (2, None)], "row 2 has a NULL content"),
        ([(1, "a"), (1, "b")], "row 2 repeats the id of row 1"),
        ([(7, "a"), (8, "b"), ("7", "c")], "row 3 repeats the id of row 1"),
        ([(SECRET, "a"), (SECRET, SECRET)], "row 2 repeats the id of row 1"),
    ],
)
def test_bad_rows_fail_the_source(tmp_path: Path, rows, message) -> None:
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'bad.db'}", module=sqlean)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE t (n INTEGER PRIMARY KEY, rid, body TEXT, note TEXT)")
        for i, (rid, body) in enumerate(rows, 1):
            conn.execute(
                sa.text("INSERT INTO t VALUES (:n, :rid, :body, :note)"),
                {"n": i, "rid": rid, "body": body, "note": SECRET},
            )
    src = SqlSource("bad", "SELECT rid AS id, body AS content, note FROM t ORDER BY n")
    with pytest.raises(SourceLoadingError) as info:
        _read(engine, src)
    assert message in str(info.value)
    assert SECRET not in str(info.value)
    engine.dispose()


def test_binary_metadata_is_refused_by_label(ext) -> None:
    src = SqlSource("crm", "SELECT account_id AS id, notes AS content, x'00ff' AS blob_col FROM accounts")
    with pytest.raises(SourceLoadingError, match="row 1: column 'blob_col' holds binary data"):
        _read(ext, src)


def test_owner_must_be_an_integer(ext) -> None:
    src = SqlSource(
        "crm",
        "SELECT account_id AS id, notes AS content, region AS owner FROM accounts",
        owner_column="owner",
    )
    with pytest.raises(SourceLoadingError, match="row 1: 'owner' .* is not an integer employee id"):
        _read(ext, src)


# -- limits ---------------------------------------------------------------------------------------
def test_max_rows_fails_rather_than_truncates(ext) -> None:
    query = "SELECT account_id AS id, notes AS content FROM accounts"
    with pytest.raises(ConfigurationError, match=r"more than max_rows \(2\) rows") as info:
        _read(ext, SqlSource("crm", query, max_rows=2))
    assert info.value.details["key"] == "sources.crm.max_rows"
    assert _read(ext, SqlSource("crm", query, max_rows=3)).count == 3


def test_fetch_size_reads_in_batches(ext) -> None:
    result = _read(
        ext, SqlSource("crm", "SELECT account_id AS id, notes AS content FROM accounts", fetch_size=1)
    )
    assert sorted(result.documents) == ["1", "2", "3"] and result.rows_read == 3


def test_empty_result_is_zero_documents(ext) -> None:
    result = _read(ext, SqlSource("crm", "SELECT account_id AS id, notes AS content FROM accounts WHERE 0"))
    assert result.count == 0 and result.rows_read == 0


# -- read-only, timeout, restored state -----------------------------------------------------------
def test_read_runs_query_only_and_restores_it(ext) -> None:
    src = SqlSource("ro", "SELECT 1 AS id, (SELECT query_only FROM pragma_query_only) AS content")
    assert _read(ext, src).documents["1"].content == "1"
    assert _query_only(ext) == 0
    with ext.begin() as conn:  # the pooled connection still writes
        conn.exec_driver_sql("INSERT INTO accounts (account_id, notes) VALUES (99, 'after')")


def test_previous_query_only_value_is_put_back(ext) -> None:
    with ext.connect() as conn:
        conn.exec_driver_sql("PRAGMA query_only = ON")
    _read(ext, SqlSource("ro", "SELECT 1 AS id, 'x' AS content"))
    assert _query_only(ext) == 1


def test_state_is_restored_after_a_failure(ext) -> None:
    with pytest.raises(SourceLoadingError):
        _read(ext, SqlSource("bad", "SELECT 1 AS id, NULL AS content"))
    assert _query_only(ext) == 0


def test_statement_timeout_stops_the_query_and_the_handler_is_removed(ext) -> None:
    endless = (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        "SELECT x AS id, 'a' AS content FROM c WHERE x < 0"
    )
    with pytest.raises(StatementTimeout, match=r"ran longer than its statement_timeout \(1s\)") as info:
        _read(ext, SqlSource("slow", endless, statement_timeout="1s"))
    assert info.value.code == "SOURCE_LOADING"
    # the same (only) pooled connection runs a long statement: no handler was left behind
    with ext.connect() as conn:
        total = conn.exec_driver_sql(
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 200000) "
            "SELECT count(*) FROM c"
        ).scalar_one()
    assert total == 200000
    assert _query_only(ext) == 0


def test_driver_errors_keep_class_and_code_only(ext) -> None:
    src = SqlSource("crm", f"SELECT id, content FROM missing_{SECRET.replace('-', '_')}")
    with pytest.raises(DatabaseError) as info:
        _read(ext, src)
    text = str(info.value)
    assert "OperationalError" in text and "SQLITE_ERROR" in text
    assert "missing_" not in text and "no such table" not in text


def test_writes_through_the_session_are_refused(ext) -> None:
    # query_only is the guard: even a statement smuggled past check_query cannot write
    with (
        read_session(ext, source="crm", timeout_s=5) as conn,
        pytest.raises(sa.exc.OperationalError, match="readonly|read-only|attempt"),
    ):
        conn.exec_driver_sql("DELETE FROM accounts")
    with ext.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM accounts").scalar_one() == 3


# -- incremental reads ----------------------------------------------------------------------------
def _incremental(**options) -> SqlSource:
    return SqlSource(
        "crm",
        "SELECT account_id AS id, notes AS content, updated_at FROM accounts",
        updated_at_column="updated_at",
        **options,
    )


def test_watermark_and_delta(ext) -> None:
    src = _incremental()
    full = _read(ext, src)
    assert full.watermark == Watermark("text", "2026-01-03T10:00:00")
    assert full.documents["1"].metadata["updated_at"] == "2026-01-01T10:00:00"
    delta = _read(ext, src, watermark=Watermark("text", "2026-01-02T10:00:00"))
    assert sorted(delta.documents) == ["2", "3"] and delta.watermark == full.watermark  # >= the watermark
    with read_session(ext, source="crm", timeout_s=5) as conn:
        assert sorted(src.read_ids(conn)) == ["1", "2", "3"]


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (None, "row 2 has a NULL 'updated_at'"),
        ("yesterday", "row 2: 'updated_at' (updated_at_column) is not a timestamp"),
        (12345, "row 2: 'updated_at' (updated_at_column) is not a timestamp"),
    ],
)
def test_bad_updated_at_fails_the_source(ext, value, message) -> None:
    with ext.begin() as conn:
        conn.execute(sa.text("UPDATE accounts SET updated_at = :v WHERE account_id = 2"), {"v": value})
    with pytest.raises(SourceLoadingError, match=re.escape(message)):
        _read(
            ext,
            SqlSource(
                "crm",
                "SELECT account_id AS id, notes AS content, updated_at FROM accounts ORDER BY account_id",
                updated_at_column="updated_at",
            ),
        )


def test_datetime_watermarks_compare_and_bind(tmp_path: Path) -> None:
    import datetime as dt

    mark = Watermark.of(dt.datetime(2026, 1, 2, 10, 0))
    assert mark.kind == "datetime" and mark.bind_value() == dt.datetime(2026, 1, 2, 10, 0)
    later = Watermark.of(dt.date(2026, 1, 3))
    assert mark.later(later, "s", 1) is later
    aware = Watermark.of(dt.datetime(2026, 1, 4, tzinfo=dt.UTC))
    with pytest.raises(SourceLoadingError, match="mix time zone-aware and naive"):
        mark.later(aware, "s", 4)


def test_ids_query_refuses_repeats_and_nulls(ext) -> None:
    src = SqlSource(
        "crm",
        "SELECT account_id % 2 AS id, notes AS content, updated_at FROM accounts ORDER BY account_id",
        updated_at_column="updated_at",
    )
    with (
        read_session(ext, source="crm", timeout_s=5) as conn,
        pytest.raises(SourceLoadingError, match="row 3 repeats the id of row 1"),
    ):
        src.read_ids(conn)
