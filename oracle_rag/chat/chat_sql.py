"""Every statement the chat backend sends: conversations, messages, tokens, chunk detail.

The tables come from migration V3 (``sql/<engine>/V3__chat.sql``). Statements
that differ between the engines exist twice; :func:`statements` picks the
set for an engine by name, so the callers stay engine-free. Binds are
``:named``; no value is ever formatted into these strings. The only
composition is the chunk-detail statement, which embeds each engine's scope
predicate constant (the same text the search statements use) at import time.
"""

from __future__ import annotations

import sqlalchemy as sa

from ..engines import oracle_sql, sqlite_sql
from ..engines._common import stmt

# -- conversations and messages -------------------------------------------------

INSERT_CONVERSATION = (
    "INSERT INTO RAG_CONVERSATION (CONVERSATION_ID, EMPLOYEE_ID, TITLE) "
    "VALUES (:conversation_id, :employee_id, :title)"
)

# Ownership is part of the statement: another caller's id reads as "no row".
GET_CONVERSATION = (
    "SELECT CONVERSATION_ID, EMPLOYEE_ID, TITLE, CREATED_AT, UPDATED_AT FROM RAG_CONVERSATION "
    "WHERE CONVERSATION_ID = :conversation_id AND EMPLOYEE_ID = :employee_id"
)

SQLITE_TOUCH_CONVERSATION = (
    "UPDATE RAG_CONVERSATION SET UPDATED_AT = strftime('%Y-%m-%dT%H:%M:%f', 'now') "
    "WHERE CONVERSATION_ID = :conversation_id AND EMPLOYEE_ID = :employee_id"
)
ORACLE_TOUCH_CONVERSATION = (
    "UPDATE RAG_CONVERSATION SET UPDATED_AT = SYSTIMESTAMP "
    "WHERE CONVERSATION_ID = :conversation_id AND EMPLOYEE_ID = :employee_id"
)

SQLITE_LIST_CONVERSATIONS = """SELECT CONVERSATION_ID, TITLE, CREATED_AT, UPDATED_AT
FROM RAG_CONVERSATION
WHERE EMPLOYEE_ID = :employee_id
ORDER BY UPDATED_AT DESC, CONVERSATION_ID
LIMIT :limit"""
ORACLE_LIST_CONVERSATIONS = """SELECT CONVERSATION_ID, TITLE, CREATED_AT, UPDATED_AT
FROM RAG_CONVERSATION
WHERE EMPLOYEE_ID = :employee_id
ORDER BY UPDATED_AT DESC, CONVERSATION_ID
FETCH FIRST :limit ROWS ONLY"""

INSERT_MESSAGE = (
    "INSERT INTO RAG_MESSAGE (CONVERSATION_ID, ROLE, CONTENT, CITATIONS) "
    "VALUES (:conversation_id, :role, :content, :citations)"
)

LIST_MESSAGES = """SELECT MESSAGE_ID, ROLE, CONTENT, CITATIONS, CREATED_AT
FROM RAG_MESSAGE
WHERE CONVERSATION_ID = :conversation_id
ORDER BY MESSAGE_ID"""

# The newest turns first; the caller reverses them. Bounded so a long
# conversation costs one small read, whatever the token budget.
SQLITE_RECENT_MESSAGES = """SELECT MESSAGE_ID, ROLE, CONTENT
FROM RAG_MESSAGE
WHERE CONVERSATION_ID = :conversation_id
ORDER BY MESSAGE_ID DESC
LIMIT :limit"""
ORACLE_RECENT_MESSAGES = """SELECT MESSAGE_ID, ROLE, CONTENT
FROM RAG_MESSAGE
WHERE CONVERSATION_ID = :conversation_id
ORDER BY MESSAGE_ID DESC
FETCH FIRST :limit ROWS ONLY"""

# -- the citation detail view ---------------------------------------------------

_GET_CHUNK_HEAD = """SELECT c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT, c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.UPDATED_AT
FROM RAG_CHUNK c
WHERE c.SOURCE_TYPE = :source_type
  AND c.SOURCE_ID = :source_id
  AND """
# The same scope predicate as every search statement (binds :see_all, :caller_id):
# a chunk the caller may not see reads exactly like one that does not exist.
SQLITE_GET_CHUNK = _GET_CHUNK_HEAD + sqlite_sql.SCOPE
ORACLE_GET_CHUNK = _GET_CHUNK_HEAD + oracle_sql.SCOPE

# Which of the task ids an answer mentions the caller may see (same scope predicate).
_VISIBLE_TASKS_HEAD = """SELECT c.SOURCE_ID
FROM RAG_CHUNK c
WHERE c.SOURCE_TYPE = 'TASK'
  AND c.SOURCE_ID IN :ids
  AND """
SQLITE_VISIBLE_TASKS = _VISIBLE_TASKS_HEAD + sqlite_sql.SCOPE
ORACLE_VISIBLE_TASKS = _VISIBLE_TASKS_HEAD + oracle_sql.SCOPE

# -- API tokens -------------------------------------------------------------------

SQLITE_INSERT_TOKEN = """INSERT INTO RAG_API_TOKEN (TOKEN_HASH, EMPLOYEE_ID, LABEL, EXPIRES_AT)
VALUES (:token_hash, :employee_id, :label,
        CASE WHEN :expires_days IS NULL THEN NULL
             ELSE strftime('%Y-%m-%dT%H:%M:%f', julianday('now') + :expires_days) END)"""
ORACLE_INSERT_TOKEN = """INSERT INTO RAG_API_TOKEN (TOKEN_HASH, EMPLOYEE_ID, LABEL, EXPIRES_AT)
VALUES (:token_hash, :employee_id, :label,
        CASE WHEN :expires_days IS NULL THEN NULL
             ELSE SYSTIMESTAMP + NUMTODSINTERVAL(:expires_days, 'DAY') END)"""

TOKEN_BY_HASH = (
    "SELECT TOKEN_ID, EMPLOYEE_ID, LABEL, CREATED_AT, EXPIRES_AT, REVOKED FROM RAG_API_TOKEN "
    "WHERE TOKEN_HASH = :token_hash"
)

# A token is valid when its hash matches, it is not revoked and not expired;
# the clock is the database's, so every server agrees on expiry.
SQLITE_VERIFY_TOKEN = """SELECT TOKEN_ID, EMPLOYEE_ID
FROM RAG_API_TOKEN
WHERE TOKEN_HASH = :token_hash
  AND REVOKED = 0
  AND (EXPIRES_AT IS NULL OR EXPIRES_AT > strftime('%Y-%m-%dT%H:%M:%f', 'now'))"""
ORACLE_VERIFY_TOKEN = """SELECT TOKEN_ID, EMPLOYEE_ID
FROM RAG_API_TOKEN
WHERE TOKEN_HASH = :token_hash
  AND REVOKED = 0
  AND (EXPIRES_AT IS NULL OR EXPIRES_AT > SYSTIMESTAMP)"""

REVOKE_TOKEN = "UPDATE RAG_API_TOKEN SET REVOKED = 1 WHERE TOKEN_ID = :token_id AND REVOKED = 0"

REVOKE_LABEL = "UPDATE RAG_API_TOKEN SET REVOKED = 1 WHERE LABEL = :label AND REVOKED = 0"

LIST_TOKENS = """SELECT TOKEN_ID, EMPLOYEE_ID, LABEL, CREATED_AT, EXPIRES_AT, REVOKED
FROM RAG_API_TOKEN
WHERE (:employee_id IS NULL OR EMPLOYEE_ID = :employee_id)
ORDER BY TOKEN_ID"""

_COMMON = {
    "INSERT_CONVERSATION": INSERT_CONVERSATION,
    "GET_CONVERSATION": GET_CONVERSATION,
    "INSERT_MESSAGE": INSERT_MESSAGE,
    "LIST_MESSAGES": LIST_MESSAGES,
    "TOKEN_BY_HASH": TOKEN_BY_HASH,
    "REVOKE_TOKEN": REVOKE_TOKEN,
    "REVOKE_LABEL": REVOKE_LABEL,
    "LIST_TOKENS": LIST_TOKENS,
}

ORACLE_STATEMENTS: dict[str, str] = {
    **_COMMON,
    "TOUCH_CONVERSATION": ORACLE_TOUCH_CONVERSATION,
    "LIST_CONVERSATIONS": ORACLE_LIST_CONVERSATIONS,
    "RECENT_MESSAGES": ORACLE_RECENT_MESSAGES,
    "GET_CHUNK": ORACLE_GET_CHUNK,
    "VISIBLE_TASKS": ORACLE_VISIBLE_TASKS,
    "INSERT_TOKEN": ORACLE_INSERT_TOKEN,
    "VERIFY_TOKEN": ORACLE_VERIFY_TOKEN,
}

SQLITE_STATEMENTS: dict[str, str] = {
    **_COMMON,
    "TOUCH_CONVERSATION": SQLITE_TOUCH_CONVERSATION,
    "LIST_CONVERSATIONS": SQLITE_LIST_CONVERSATIONS,
    "RECENT_MESSAGES": SQLITE_RECENT_MESSAGES,
    "GET_CHUNK": SQLITE_GET_CHUNK,
    "VISIBLE_TASKS": SQLITE_VISIBLE_TASKS,
    "INSERT_TOKEN": SQLITE_INSERT_TOKEN,
    "VERIFY_TOKEN": SQLITE_VERIFY_TOKEN,
}

# Oracle CLOB columns written by these statements: bound as CLOB so long
# answers are not cut at the VARCHAR2 limit.
CLOB_BINDS: dict[str, tuple[str, ...]] = {"INSERT_MESSAGE": ("content", "citations")}


def statements(engine_name: str) -> dict[str, str]:
    """The statement set for an engine (``oracle`` or ``sqlite``)."""
    if engine_name == "oracle":
        return ORACLE_STATEMENTS
    if engine_name == "sqlite":
        return SQLITE_STATEMENTS
    raise ValueError(f"no chat statements for engine {engine_name!r}")


EXPANDING_BINDS: dict[str, tuple[str, ...]] = {"VISIBLE_TASKS": ("ids",)}


def query(engine_name: str, name: str) -> sa.TextClause:
    """The named statement for an engine as a cached, executable ``text()`` clause."""
    return stmt(statements(engine_name)[name], EXPANDING_BINDS.get(name, ()),
                clobs=CLOB_BINDS.get(name, ()) if engine_name == "oracle" else ())
