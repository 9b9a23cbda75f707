-- oracle-rag: let the read-only user query the allow-listed views.
--
-- Run as the APPLICATION user (the owner of the views), after the migrations that create
-- them (the reference application's schema: `oracle-rag demo seed` or
-- `oracle-rag migrate --demo`); re-running is harmless. It is not an init script because the
-- views do not exist when the container is first initialised. local/README.md shows how to run it in the
-- container; any SQL client connected as the application user works too.
--
-- READ rather than SELECT: READ allows queries only, while SELECT also allows
-- SELECT ... FOR UPDATE and LOCK TABLE, which a read-only caller has no use for.
-- Views only, never the RAG_ tables, the queue or the models: guarded SQL sees exactly what
-- these views expose. The read-only user names them without a schema through private
-- synonyms a DBA creates once (local/readonly_synonyms.sql; the local container's init
-- script does it).
--
-- If you renamed the read-only user (RAG_RO_USER), replace RAG_RO below.

WHENEVER SQLERROR EXIT FAILURE

GRANT READ ON RAG_V_TASK TO RAG_RO;
GRANT READ ON RAG_V_SPRINT TO RAG_RO;
GRANT READ ON RAG_V_PROJECT TO RAG_RO;
GRANT READ ON RAG_V_EMPLOYEE TO RAG_RO;

EXIT
