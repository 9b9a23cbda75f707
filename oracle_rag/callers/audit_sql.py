"""The audit trail's statements (callers/audit.py): insert, list, prune over RAG_AUDIT.

Times are ISO-8601 UTC text on both engines, so ``AT >= :since`` and the
retention cut compare as text in the same order as time.
"""

from __future__ import annotations

from oracle_rag.engines.statements import Sql

INSERT_AUDIT = Sql(
    oracle="""INSERT INTO RAG_AUDIT (AT, CALLER_ID, ENTRY_POINT, ACTION, RECORDS, GUARDED_SQL, QUESTION)
VALUES (:at, :caller_id, :entry_point, :action, :records, :guarded_sql, :question)""",
    sqlite="""INSERT INTO RAG_AUDIT (AT, CALLER_ID, ENTRY_POINT, ACTION, RECORDS, GUARDED_SQL, QUESTION)
VALUES (:at, :caller_id, :entry_point, :action, :records, :guarded_sql, :question)""",
    clobs=("records", "guarded_sql", "question"),
)
LIST_AUDIT = Sql(
    oracle="""SELECT AUDIT_ID, AT, CALLER_ID, ENTRY_POINT, ACTION, RECORDS, GUARDED_SQL, QUESTION FROM RAG_AUDIT
WHERE (:caller_id IS NULL OR CALLER_ID = :caller_id) AND (:since IS NULL OR AT >= :since)
ORDER BY AT DESC, AUDIT_ID DESC
FETCH FIRST :limit ROWS ONLY""",
    sqlite="""SELECT AUDIT_ID, AT, CALLER_ID, ENTRY_POINT, ACTION, RECORDS, GUARDED_SQL, QUESTION FROM RAG_AUDIT
WHERE (:caller_id IS NULL OR CALLER_ID = :caller_id) AND (:since IS NULL OR AT >= :since)
ORDER BY AT DESC, AUDIT_ID DESC
LIMIT :limit""",
)
DELETE_OLD_AUDIT = Sql.both("DELETE FROM RAG_AUDIT WHERE AT < :before")
