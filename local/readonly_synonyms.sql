-- oracle-rag: private synonyms that let the read-only user name the views without a schema.
--
-- Run ONCE as a DBA (SYS in FREEPDB1, or ADMIN on Autonomous Database): creating objects in
-- another user's schema needs CREATE ANY SYNONYM, which neither oracle-rag user has, and the
-- read-only user cannot create them itself (a READ ONLY user runs no DDL, ORA-28194).
-- local/init/01_users.sh runs the same statements for the local container. A synonym may be
-- created before the view it names exists, so this can run before `oracle-rag migrate`.
--
-- Why synonyms and not `ALTER SESSION SET CURRENT_SCHEMA`: the model writes `FROM RAG_V_TASK`;
-- with these synonyms that resolves in the read-only user's own schema, so the guarded path
-- issues no session-level SQL (a READ ONLY user may be refused it) and leaves nothing on a
-- pooled session to undo. Private, not PUBLIC, synonyms: no other user gains a name.
--
-- Replace RAG_APP (the owner of the views) and RAG_RO (the read-only user) if you renamed them.
-- READ on the views is granted separately by their owner: local/grant_readonly.sql.

WHENEVER SQLERROR EXIT FAILURE

CREATE OR REPLACE SYNONYM RAG_RO.RAG_V_TASK FOR RAG_APP.RAG_V_TASK;
CREATE OR REPLACE SYNONYM RAG_RO.RAG_V_SPRINT FOR RAG_APP.RAG_V_SPRINT;
CREATE OR REPLACE SYNONYM RAG_RO.RAG_V_PROJECT FOR RAG_APP.RAG_V_PROJECT;
CREATE OR REPLACE SYNONYM RAG_RO.RAG_V_EMPLOYEE FOR RAG_APP.RAG_V_EMPLOYEE;

EXIT
