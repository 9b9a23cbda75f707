-- V10: declared access (issue 23) and the audit trail (embedded engine).
-- (a) Who may read a chunk, written by the indexer from its source's access
--     policy (sources/access.py), the same on every chunk of a record:
--     ACCESS_OWNER  the employee the owner rule lets in (NULL: none);
--     ACCESS_PUBLIC 1 when everyone may read it;
--     ACCESS_GROUPS the record's groups as a canonical JSON array (NULL: none),
--                   what the indexer compares and the in-process caches read.
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

ALTER TABLE RAG_CHUNK ADD COLUMN ACCESS_OWNER INTEGER;

ALTER TABLE RAG_CHUNK ADD COLUMN ACCESS_PUBLIC INTEGER NOT NULL DEFAULT 0 CHECK (ACCESS_PUBLIC IN (0, 1));

ALTER TABLE RAG_CHUNK ADD COLUMN ACCESS_GROUPS TEXT CHECK (ACCESS_GROUPS IS NULL OR json_valid(ACCESS_GROUPS));

UPDATE RAG_CHUNK
SET ACCESS_OWNER = OWNER_ID,
    ACCESS_PUBLIC = CASE WHEN OWNER_ID IS NULL AND SOURCE_TYPE <> 'TASK' THEN 1 ELSE 0 END;

CREATE INDEX RAG_CHUNK_ACCESS_OWNER_IX ON RAG_CHUNK (ACCESS_OWNER);

CREATE TABLE RAG_CHUNK_ACL (
  PRINCIPAL    TEXT NOT NULL,
  SOURCE_TYPE  TEXT NOT NULL,
  SOURCE_ID    TEXT NOT NULL,
  PRIMARY KEY (PRINCIPAL, SOURCE_TYPE, SOURCE_ID)
) WITHOUT ROWID;

CREATE INDEX RAG_CHUNK_ACL_RECORD_IX ON RAG_CHUNK_ACL (SOURCE_TYPE, SOURCE_ID);

CREATE TABLE RAG_ACCESS_FAILURE (
  SOURCE_TYPE  TEXT NOT NULL PRIMARY KEY,
  FAILED_AT    TEXT NOT NULL,
  ERROR_CODE   TEXT
);

CREATE TABLE RAG_AUDIT (
  AUDIT_ID     INTEGER PRIMARY KEY AUTOINCREMENT,
  AT           TEXT    NOT NULL,
  CALLER_ID    INTEGER NOT NULL,
  ENTRY_POINT  TEXT    NOT NULL,
  ACTION       TEXT    NOT NULL,
  RECORDS      TEXT    NOT NULL DEFAULT '[]' CHECK (json_valid(RECORDS)),
  GUARDED_SQL  TEXT,
  QUESTION     TEXT
);

CREATE INDEX RAG_AUDIT_AT_IX ON RAG_AUDIT (AT);

CREATE INDEX RAG_AUDIT_CALLER_IX ON RAG_AUDIT (CALLER_ID, AT);
