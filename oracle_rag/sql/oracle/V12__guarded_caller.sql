-- V12: the caller of a guarded (model-written) query, for the aggregate views (issue 23, Oracle).
-- The read-only user that runs the query cannot set an application context,
-- so the product's own session writes the caller here under an unguessable
-- token before the query and deletes it after; the read-only session sets
-- CLIENT_IDENTIFIER to the token, and the views (owned by this schema, read
-- with its rights) read the caller's id, see-all and groups from these rows
-- (engines/guarded_scope_sql.py). The read-only user has no grant on them.
-- Each statement commits on its own; a re-run resumes at the first one that
-- did not complete (see migrations.py).

CREATE TABLE RAG_GUARDED_CALLER (
  TOKEN        VARCHAR2(64 CHAR) NOT NULL,
  CALLER_ID    NUMBER NOT NULL,
  SEE_ALL      NUMBER(1) NOT NULL,
  CREATED_AT   TIMESTAMP WITH TIME ZONE DEFAULT SYSTIMESTAMP NOT NULL,
  CONSTRAINT RAG_GUARDED_CALLER_PK PRIMARY KEY (TOKEN),
  CONSTRAINT RAG_GUARDED_CALLER_SEE_ALL_CK CHECK (SEE_ALL IN (0, 1))
);

CREATE TABLE RAG_GUARDED_GROUP (
  TOKEN        VARCHAR2(64 CHAR) NOT NULL,
  PRINCIPAL    VARCHAR2(200 CHAR) NOT NULL,
  CONSTRAINT RAG_GUARDED_GROUP_PK PRIMARY KEY (TOKEN, PRINCIPAL),
  CONSTRAINT RAG_GUARDED_GROUP_CALLER_FK FOREIGN KEY (TOKEN)
    REFERENCES RAG_GUARDED_CALLER (TOKEN) ON DELETE CASCADE
);
