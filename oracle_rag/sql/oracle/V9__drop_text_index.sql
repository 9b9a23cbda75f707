-- V9: drop the Oracle Text index and its lexer preference (created by V2/V6 before they were
-- retired). Keyword search is BM25 over RAG_CHUNK_TERM (V5): no statement reads the CONTEXT
-- index, which still synced on every worker commit (SYNC (ON COMMIT)) and fragmented.
-- One PL/SQL block, idempotent: the index is dropped only where USER_INDEXES lists it, and the
-- preference only where Oracle Text is installed and the preference exists, both through
-- dynamic SQL, so the block compiles and runs on a database without Oracle Text (-slim images).

DECLARE
  l_found PLS_INTEGER;
BEGIN
  SELECT COUNT(*) INTO l_found FROM USER_INDEXES WHERE INDEX_NAME = 'RAG_CHUNK_TEXT_IX';
  IF l_found > 0 THEN
    EXECUTE IMMEDIATE 'DROP INDEX RAG_CHUNK_TEXT_IX';
  END IF;
  SELECT COUNT(*) INTO l_found FROM ALL_OBJECTS WHERE OWNER = 'CTXSYS' AND OBJECT_NAME = 'CTX_USER_PREFERENCES';
  IF l_found > 0 THEN
    EXECUTE IMMEDIATE 'SELECT COUNT(*) FROM CTXSYS.CTX_USER_PREFERENCES WHERE PRE_NAME = ''RAG_TEXT_LEXER'''
      INTO l_found;
    IF l_found > 0 THEN
      EXECUTE IMMEDIATE 'BEGIN CTX_DDL.DROP_PREFERENCE(''RAG_TEXT_LEXER''); END;';
    END IF;
  END IF;
END;
/
