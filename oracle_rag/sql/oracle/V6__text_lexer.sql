-- V6: accent-insensitive keyword search (Oracle Text lexer with base-letter conversion).
-- The query side folds accents (keywords.oracle_text_query), but V2's index used the default
-- BASIC_LEXER, which indexes "energía" as written, so the folded query term "energia" never
-- matched it. A BASIC_LEXER preference with BASE_LETTER YES converts characters with
-- diacritics to their base letter both when indexing and when querying (Oracle Text
-- Reference, BASIC_LEXER attributes). Preferences are created with CTX_DDL in PL/SQL
-- (CTXAPP role; the application user owns it); the block is idempotent, so a re-run that
-- resumes here is harmless. The index is then re-created with the lexer: each statement
-- commits on its own and a re-run resumes at the first that did not complete.
-- SYNC (ON COMMIT) as in V2: a committed chunk is searchable by keyword at once. Frequent
-- syncs fragment a CONTEXT index; `oracle-rag index optimize` (CTX_DDL.OPTIMIZE_INDEX)
-- compacts it, run periodically (docs/operations-oracle.md).

DECLARE
  l_found PLS_INTEGER;
BEGIN
  SELECT COUNT(*) INTO l_found FROM CTX_USER_PREFERENCES WHERE PRE_NAME = 'RAG_TEXT_LEXER';
  IF l_found = 0 THEN
    CTX_DDL.CREATE_PREFERENCE('RAG_TEXT_LEXER', 'BASIC_LEXER');
  END IF;
  CTX_DDL.SET_ATTRIBUTE('RAG_TEXT_LEXER', 'BASE_LETTER', 'YES');
END;
/

DROP INDEX RAG_CHUNK_TEXT_IX;

CREATE INDEX RAG_CHUNK_TEXT_IX ON RAG_CHUNK (CONTENT)
  INDEXTYPE IS CTXSYS.CONTEXT
  PARAMETERS ('LEXER RAG_TEXT_LEXER SYNC (ON COMMIT)');
