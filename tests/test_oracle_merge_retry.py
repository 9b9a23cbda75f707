"""Two workers MERGE one record; the second INSERT fails with ORA-00001, a benign race.

``OracleEngine.upsert_chunks`` retries once when the error is ORA-00001 and
re-raises anything else. Without a database, what can be checked here is the
classification on the driver's own error objects: python-oracledb (thin mode)
builds a server error as ``errors._Error(message, code=...)`` and raises
``error.exc_type(error)``; SQLAlchemy wraps it as ``sa.exc.IntegrityError``.
The race itself runs in tests/oracle/test_oracle_suite.py.
"""

from __future__ import annotations

import oracledb
import pytest
import sqlalchemy as sa
from oracledb import errors as oracledb_errors

from oracle_rag.engines.oracle.engine import UNIQUE_VIOLATION, is_unique_violation


def _driver_error(code: int, message: str) -> oracledb.Error:
    error = oracledb_errors._Error(message, code=code)  # noqa: SLF001 - how the thin driver builds one
    return error.exc_type(error)


def _wrapped(exc: oracledb.Error) -> sa.exc.DBAPIError:
    return sa.exc.DBAPIError.instance("MERGE INTO RAG_CHUNK ...", {}, exc, oracledb.Error)


def test_ora_00001_is_an_integrity_error_and_a_unique_violation() -> None:
    exc = _driver_error(
        1,
        "ORA-00001: unique constraint (RAG_APP.RAG_CHUNK_SOURCE_UK) violated on table "
        "RAG_APP.RAG_CHUNK columns (SOURCE_TYPE, SOURCE_ID, CHUNK_NO)",
    )
    assert isinstance(exc, oracledb.IntegrityError)
    wrapped = _wrapped(exc)
    assert isinstance(wrapped, sa.exc.IntegrityError)  # what upsert_chunks catches
    assert is_unique_violation(wrapped) and is_unique_violation(exc)
    assert UNIQUE_VIOLATION == "ORA-00001"


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (1400, 'ORA-01400: cannot insert NULL into ("RAG_APP"."RAG_CHUNK"."CONTENT")'),  # also IntegrityError
        (
            2291,
            "ORA-02291: integrity constraint (RAG_APP.RAG_CHUNK_TERM_CHUNK_FK) violated - parent key not found",
        ),
        (2290, "ORA-02290: check constraint (RAG_APP.RAG_CHUNK_TERM_TF_CK) violated"),
        (60, "ORA-00060: deadlock detected while waiting for resource"),
    ],
)
def test_other_errors_are_not_the_benign_race(code: int, message: str) -> None:
    wrapped = _wrapped(_driver_error(code, message))
    assert not is_unique_violation(wrapped), message
