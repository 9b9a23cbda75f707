"""Every statement feedback on answers sends (migrations V12/V15 SQLite, V11/V15 Oracle: ``RAG_FEEDBACK``).

Ownership is part of the insert: a message of another caller's conversation (or a question, or a
missing id) inserts no row, which the caller reports as "not found".
"""

from __future__ import annotations

from oracle_rag.answering.messages_sql import question_before
from oracle_rag.engines.statements import Sql

# The rated answer's guarded SQL and the question before it, if the answer is the caller's: no row
# for a message of another caller's conversation, a question, or a missing id ("not found").
RATED_ANSWER = Sql.both(f"""SELECT m.GUARDED_SQL, {question_before("m")} AS QUESTION
FROM RAG_MESSAGE m
JOIN RAG_CONVERSATION c ON c.CONVERSATION_ID = m.CONVERSATION_ID
WHERE m.MESSAGE_ID = :message_id
  AND m.ROLE = 'assistant'
  AND c.EMPLOYEE_ID = :caller_id""")

# Copies what was understood and the guarded SQL from the rated answer; never its rows. The example
# columns hold the question and SQL with their literals as placeholders (answering/aggregate/examples.py).
INSERT_FEEDBACK = Sql.both("""INSERT INTO RAG_FEEDBACK (MESSAGE_ID, CALLER_ID, RATING, COMMENT_TEXT, UNDERSTOOD, GUARDED_SQL,
                          EXAMPLE_QUESTION, EXAMPLE_SQL)
SELECT m.MESSAGE_ID, :caller_id, :rating, :comment_text, m.UNDERSTOOD, m.GUARDED_SQL, :example_question, :example_sql
FROM RAG_MESSAGE m
JOIN RAG_CONVERSATION c ON c.CONVERSATION_ID = m.CONVERSATION_ID
WHERE m.MESSAGE_ID = :message_id
  AND m.ROLE = 'assistant'
  AND c.EMPLOYEE_ID = :caller_id""")

# Each rating with the answer it rates and the question asked just before it in the same conversation.
# :since is an ISO-8601 time without zone ('YYYY-MM-DDTHH:MM:SS', UTC); NULL binds mean "any".
_LIST = """SELECT f.FEEDBACK_ID, f.MESSAGE_ID, f.CALLER_ID, f.RATING, f.COMMENT_TEXT, f.UNDERSTOOD, f.GUARDED_SQL,
       f.CREATED_AT, m.CONTENT,
       {question} AS QUESTION
FROM RAG_FEEDBACK f
JOIN RAG_MESSAGE m ON m.MESSAGE_ID = f.MESSAGE_ID
WHERE (:rating IS NULL OR f.RATING = :rating)
  AND (:since IS NULL OR f.CREATED_AT >= {since})
ORDER BY f.FEEDBACK_ID"""

LIST_FEEDBACK = Sql(
    sqlite=_LIST.format(question=question_before("m"), since=":since"),
    oracle=_LIST.format(
        question=question_before("m"), since="TO_TIMESTAMP(:since, 'YYYY-MM-DD\"T\"HH24:MI:SS')"
    ),
)
