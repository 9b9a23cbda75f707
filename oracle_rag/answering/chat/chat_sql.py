"""Every statement the chat backend sends: conversations, messages, chunk detail.

The tables come from migration V3 (``sql/<engine>/V3__chat.sql``). Each
statement is an :class:`~oracle_rag.engines.Sql`: written once when both
engines agree, side by side when they differ; the engine picks the text
(``engine.statement(chat_sql.X)``), so the callers stay engine-free. Binds
are ``:named``; no value is ever formatted into these strings. The only
composition is the chunk-detail and visible-task statements, which embed the
scope predicate (``engine_sql.SCOPE``, the text every search uses).
"""

from __future__ import annotations

from oracle_rag.engines.engine_sql import SCOPE
from oracle_rag.engines.statements import Sql

# -- conversations and messages -------------------------------------------------

INSERT_CONVERSATION = Sql.both(
    "INSERT INTO RAG_CONVERSATION (CONVERSATION_ID, EMPLOYEE_ID, TITLE) "
    "VALUES (:conversation_id, :employee_id, :title)"
)

# Ownership is part of the statement: another caller's id reads as "no row".
GET_CONVERSATION = Sql.both(
    "SELECT CONVERSATION_ID, EMPLOYEE_ID, TITLE, CREATED_AT, UPDATED_AT FROM RAG_CONVERSATION "
    "WHERE CONVERSATION_ID = :conversation_id AND EMPLOYEE_ID = :employee_id"
)

TOUCH_CONVERSATION = Sql(
    sqlite=(
        "UPDATE RAG_CONVERSATION SET UPDATED_AT = strftime('%Y-%m-%dT%H:%M:%f', 'now') "
        "WHERE CONVERSATION_ID = :conversation_id AND EMPLOYEE_ID = :employee_id"
    ),
    oracle=(
        "UPDATE RAG_CONVERSATION SET UPDATED_AT = SYSTIMESTAMP "
        "WHERE CONVERSATION_ID = :conversation_id AND EMPLOYEE_ID = :employee_id"
    ),
)

LIST_CONVERSATIONS = Sql(
    sqlite="""SELECT CONVERSATION_ID, TITLE, CREATED_AT, UPDATED_AT
FROM RAG_CONVERSATION
WHERE EMPLOYEE_ID = :employee_id
ORDER BY UPDATED_AT DESC, CONVERSATION_ID
LIMIT :limit""",
    oracle="""SELECT CONVERSATION_ID, TITLE, CREATED_AT, UPDATED_AT
FROM RAG_CONVERSATION
WHERE EMPLOYEE_ID = :employee_id
ORDER BY UPDATED_AT DESC, CONVERSATION_ID
FETCH FIRST :limit ROWS ONLY""",
)

# Oracle CLOB columns: bound as CLOB so long answers are not cut at the VARCHAR2 limit.
# UNDERSTOOD (the structured part's kind and filters) and GUARDED_SQL: migration V12 (SQLite) / V11 (Oracle),
# what a rating of this answer carries (answering/chat/feedback.py).
INSERT_MESSAGE = Sql.both(
    "INSERT INTO RAG_MESSAGE (CONVERSATION_ID, ROLE, CONTENT, CITATIONS, UNDERSTOOD, GUARDED_SQL) "
    "VALUES (:conversation_id, :role, :content, :citations, :understood, :guarded_sql)",
    clobs=("content", "citations", "understood", "guarded_sql"),
)

# The id of the message just stored: read in the same transaction, after the conversation row was
# inserted or updated (that row lock orders two appends to one conversation), so it is this turn's answer.
LAST_MESSAGE_ID = Sql.both("SELECT MAX(MESSAGE_ID) FROM RAG_MESSAGE WHERE CONVERSATION_ID = :conversation_id")

LIST_MESSAGES = Sql.both("""SELECT MESSAGE_ID, ROLE, CONTENT, CITATIONS, CREATED_AT
FROM RAG_MESSAGE
WHERE CONVERSATION_ID = :conversation_id
ORDER BY MESSAGE_ID""")

# The newest turns first; the caller reverses them. Bounded so a long
# conversation costs one small read, whatever the token budget.
RECENT_MESSAGES = Sql(
    sqlite="""SELECT MESSAGE_ID, ROLE, CONTENT
FROM RAG_MESSAGE
WHERE CONVERSATION_ID = :conversation_id
ORDER BY MESSAGE_ID DESC
LIMIT :limit""",
    oracle="""SELECT MESSAGE_ID, ROLE, CONTENT
FROM RAG_MESSAGE
WHERE CONVERSATION_ID = :conversation_id
ORDER BY MESSAGE_ID DESC
FETCH FIRST :limit ROWS ONLY""",
)

# -- the citation detail view ---------------------------------------------------

# Every chunk of one record (a long record is several windows; the caller joins
# them in CHUNK_NO order), with the same scope predicate as every search
# statement (binds :see_all, :caller_id): a record the caller may not see reads
# exactly like one that does not exist.
GET_CHUNK = Sql.both(
    """SELECT c.SOURCE_TYPE, c.SOURCE_ID, c.CONTENT, c.OWNER_ID, c.PROJECT_ID, c.SPRINT_ID, c.UPDATED_AT,
       c.CHUNK_NO
FROM RAG_CHUNK c
WHERE c.SOURCE_TYPE = :source_type
  AND c.SOURCE_ID = :source_id
  AND """
    + SCOPE
)

# Which of the task ids an answer mentions the caller may see (same scope predicate).
# The records of one type an answer mentions that the caller may see (answering/chat/mentions.py).
VISIBLE_RECORDS = Sql.both(
    """SELECT DISTINCT c.SOURCE_ID
FROM RAG_CHUNK c
WHERE c.SOURCE_TYPE = :source_type
  AND c.SOURCE_ID IN :ids
  AND """
    + SCOPE,
    expanding=("ids",),
)
