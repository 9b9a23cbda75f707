"""The statements over the product's API tokens (table ``RAG_API_TOKEN``, migration V3).

Only a token's SHA-256 is stored; the expiry clock is the database's, so every
server agrees on it. Each statement is an :class:`~oracle_rag.engines.Sql`.
"""

from __future__ import annotations

from oracle_rag.engines.statements import Sql

INSERT_TOKEN = Sql(
    sqlite="""INSERT INTO RAG_API_TOKEN (TOKEN_HASH, EMPLOYEE_ID, LABEL, EXPIRES_AT)
VALUES (:token_hash, :employee_id, :label,
        CASE WHEN :expires_days IS NULL THEN NULL
             ELSE strftime('%Y-%m-%dT%H:%M:%f', julianday('now') + :expires_days) END)""",
    oracle="""INSERT INTO RAG_API_TOKEN (TOKEN_HASH, EMPLOYEE_ID, LABEL, EXPIRES_AT)
VALUES (:token_hash, :employee_id, :label,
        CASE WHEN :expires_days IS NULL THEN NULL
             ELSE SYSTIMESTAMP + NUMTODSINTERVAL(:expires_days, 'DAY') END)""",
)

TOKEN_BY_HASH = Sql.both(
    "SELECT TOKEN_ID, EMPLOYEE_ID, LABEL, CREATED_AT, EXPIRES_AT, REVOKED FROM RAG_API_TOKEN "
    "WHERE TOKEN_HASH = :token_hash"
)

# A token is valid when its hash matches, it is not revoked and not expired;
# the clock is the database's, so every server agrees on expiry.
VERIFY_TOKEN = Sql(
    sqlite="""SELECT TOKEN_ID, EMPLOYEE_ID
FROM RAG_API_TOKEN
WHERE TOKEN_HASH = :token_hash
  AND REVOKED = 0
  AND (EXPIRES_AT IS NULL OR EXPIRES_AT > strftime('%Y-%m-%dT%H:%M:%f', 'now'))""",
    oracle="""SELECT TOKEN_ID, EMPLOYEE_ID
FROM RAG_API_TOKEN
WHERE TOKEN_HASH = :token_hash
  AND REVOKED = 0
  AND (EXPIRES_AT IS NULL OR EXPIRES_AT > SYSTIMESTAMP)""",
)

REVOKE_TOKEN = Sql.both("UPDATE RAG_API_TOKEN SET REVOKED = 1 WHERE TOKEN_ID = :token_id AND REVOKED = 0")

REVOKE_LABEL = Sql.both("UPDATE RAG_API_TOKEN SET REVOKED = 1 WHERE LABEL = :label AND REVOKED = 0")

LIST_TOKENS = Sql.both("""SELECT TOKEN_ID, EMPLOYEE_ID, LABEL, CREATED_AT, EXPIRES_AT, REVOKED
FROM RAG_API_TOKEN
WHERE (:employee_id IS NULL OR EMPLOYEE_ID = :employee_id)
ORDER BY TOKEN_ID""")
