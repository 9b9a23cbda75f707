-- V10: declared access (issue 23) and the audit trail (Oracle).
-- (a) Who may read a chunk, written by the indexer from its source's access
--     policy (sources/access.py), the same on every chunk of a record:
--     ACCESS_OWNER  the employee the owner rule lets in (NULL: none);
--     ACCESS_PUBLIC 1 when everyone may read it;
--     ACCESS_GROUPS the record's groups as a canonical JSON array (NULL: none),
--                   what the indexer compares.
--     Existing rows get the rule the product applied before V10 (the owner,
--     else everyone except for an unowned TASK), so nothing changes for them.
-- (b) RAG_CHUNK_ACL: one row per (record, group); the scope predicate
--     (engine_sql.SCOPE) matches the caller's groups against PRINCIPAL, so the
--     key leads with it.
-- (c) RAG_ACCESS_FAILURE: a source whose permission data (acl_query) could
--     not be read: its records are hidden from callers without see-all until
--     the next successful read deletes the row.
-- (d) RAG_AUDIT: who asked what through which entry point, which records
--     were returned, which guarded SQL ran (oracle_rag/audit.py).
-- Each statement commits on its own; a re-run resumes at the first one that
-- did not complete (see migrations.py).

ALTER TABLE RAG_CHUNK ADD (
  ACCESS_OWNER   NUMBER,
  ACCESS_PUBLIC  NUMBER(1) DEFAULT 0 NOT NULL CONSTRAINT RAG_CHUNK_ACCESS_PUBLIC_CK CHECK (ACCESS_PUBLIC IN (0, 1)),
  ACCESS_GROUPS  CLOB CONSTRAINT RAG_CHUNK_ACCESS_GROUPS_CK CHECK (ACCESS_GROUPS IS JSON)
);

UPDATE RAG_CHUNK
SET ACCESS_OWNER = OWNER_ID,
    ACCESS_PUBLIC = CASE WHEN OWNER_ID IS NULL AND SOURCE_TYPE <> 'TASK' THEN 1 ELSE 0 END;

CREATE INDEX RAG_CHUNK_ACCESS_OWNER_IX ON RAG_CHUNK (ACCESS_OWNER);

CREATE TABLE RAG_CHUNK_ACL (
  PRINCIPAL    VARCHAR2(200 CHAR) NOT NULL,
  SOURCE_TYPE  VARCHAR2(64 CHAR)  NOT NULL,
  SOURCE_ID    VARCHAR2(256 CHAR) NOT NULL,
  CONSTRAINT RAG_CHUNK_ACL_PK PRIMARY KEY (PRINCIPAL, SOURCE_TYPE, SOURCE_ID)
);

CREATE INDEX RAG_CHUNK_ACL_RECORD_IX ON RAG_CHUNK_ACL (SOURCE_TYPE, SOURCE_ID);

CREATE TABLE RAG_ACCESS_FAILURE (
  SOURCE_TYPE  VARCHAR2(64 CHAR) NOT NULL,
  FAILED_AT    VARCHAR2(40 CHAR) NOT NULL,
  ERROR_CODE   VARCHAR2(64 CHAR),
  CONSTRAINT RAG_ACCESS_FAILURE_PK PRIMARY KEY (SOURCE_TYPE)
);

CREATE TABLE RAG_AUDIT (
  AUDIT_ID     NUMBER GENERATED ALWAYS AS IDENTITY,
  AT           VARCHAR2(40 CHAR) NOT NULL,
  CALLER_ID    NUMBER NOT NULL,
  ENTRY_POINT  VARCHAR2(16 CHAR) NOT NULL,
  ACTION       VARCHAR2(16 CHAR) NOT NULL,
  RECORDS      CLOB DEFAULT '[]' NOT NULL CONSTRAINT RAG_AUDIT_RECORDS_CK CHECK (RECORDS IS JSON),
  GUARDED_SQL  CLOB,
  QUESTION     CLOB,
  CONSTRAINT RAG_AUDIT_PK PRIMARY KEY (AUDIT_ID)
);

CREATE INDEX RAG_AUDIT_AT_IX ON RAG_AUDIT (AT);

CREATE INDEX RAG_AUDIT_CALLER_IX ON RAG_AUDIT (CALLER_ID, AT);
