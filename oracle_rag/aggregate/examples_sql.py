"""The statement that reads accepted question -> SQL examples (``RAG_FEEDBACK``, issue 26).

An example is an answer rated "up" that ran guarded SQL: its question (the user message just
before it) and that SQL. Never rows: ``RAG_FEEDBACK`` does not hold any.
"""

from __future__ import annotations

from ..engines.statements import Sql
from ..messages_sql import question_before

_ACCEPTED = f"""SELECT f.GUARDED_SQL,
       {question_before('m')} AS QUESTION
FROM RAG_FEEDBACK f
JOIN RAG_MESSAGE m ON m.MESSAGE_ID = f.MESSAGE_ID
WHERE f.RATING = 1
  AND f.GUARDED_SQL IS NOT NULL
ORDER BY f.FEEDBACK_ID DESC
"""

# The newest accepted answers (bounded); the caller ranks them by likeness to the question.
ACCEPTED_SQL = Sql(sqlite=_ACCEPTED + "LIMIT :limit", oracle=_ACCEPTED + "FETCH FIRST :limit ROWS ONLY")
