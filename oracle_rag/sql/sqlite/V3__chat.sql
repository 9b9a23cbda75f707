-- V3: chat conversations, their messages and API tokens (embedded engine).
-- No foreign key to EMPLOYEE: that table belongs to the reference
-- application (the "demo" migration set), and a host application keeps its
-- people elsewhere. EMPLOYEE_ID is the authenticated caller's id.

-- CONVERSATION_ID is random (uuid4 hex), so ids do not reveal how many
-- conversations exist; ownership is still checked in every query.
CREATE TABLE RAG_CONVERSATION (
  CONVERSATION_ID  TEXT    PRIMARY KEY CHECK (length(CONVERSATION_ID) = 32),
  EMPLOYEE_ID      INTEGER NOT NULL,
  TITLE            TEXT    NOT NULL,
  CREATED_AT       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now')),
  UPDATED_AT       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now'))
);

CREATE INDEX RAG_CONVERSATION_OWNER_IX ON RAG_CONVERSATION (EMPLOYEE_ID, UPDATED_AT);

-- CITATIONS is a JSON array of {source_type, source_id, snippet}.
CREATE TABLE RAG_MESSAGE (
  MESSAGE_ID       INTEGER PRIMARY KEY AUTOINCREMENT,
  CONVERSATION_ID  TEXT    NOT NULL REFERENCES RAG_CONVERSATION (CONVERSATION_ID) ON DELETE CASCADE,
  ROLE             TEXT    NOT NULL CHECK (ROLE IN ('user', 'assistant')),
  CONTENT          TEXT    NOT NULL,
  CITATIONS        TEXT    CHECK (CITATIONS IS NULL OR json_valid(CITATIONS)),
  CREATED_AT       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now'))
);

CREATE INDEX RAG_MESSAGE_CONVERSATION_IX ON RAG_MESSAGE (CONVERSATION_ID, MESSAGE_ID);

-- Only the SHA-256 (hex) of a token is stored; the token itself is shown
-- once, when it is created.
CREATE TABLE RAG_API_TOKEN (
  TOKEN_ID     INTEGER PRIMARY KEY AUTOINCREMENT,
  TOKEN_HASH   TEXT    NOT NULL UNIQUE CHECK (length(TOKEN_HASH) = 64),
  EMPLOYEE_ID  INTEGER NOT NULL,
  LABEL        TEXT,
  CREATED_AT   TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%f', 'now')),
  EXPIRES_AT   TEXT,
  REVOKED      INTEGER NOT NULL DEFAULT 0 CHECK (REVOKED IN (0, 1))
);

CREATE INDEX RAG_API_TOKEN_EMPLOYEE_IX ON RAG_API_TOKEN (EMPLOYEE_ID);
