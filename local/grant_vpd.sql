-- oracle-rag: what the application user needs for `oracle-rag provision --vpd` (docs/access.md).
--
-- Optional: only for the VPD second wall (issue 23). Run ONCE as a DBA (SYS in FREEPDB1, or
-- ADMIN on Autonomous Database), then `oracle-rag provision --vpd` as the application user.
--
-- CREATE ANY CONTEXT: `CREATE CONTEXT RAG_ACCESS_CTX USING RAG_ACCESS_CTX_PKG` needs it (SQL
-- Language Reference, CREATE CONTEXT, Prerequisites); no role the application user has carries
-- it (DB_DEVELOPER_ROLE does not). EXECUTE ON DBMS_RLS: DB_DEVELOPER_ROLE grants it on 23ai, but
-- a least-privilege user without that role needs it directly (ADD_POLICY / DROP_POLICY).
-- Nothing is granted to the read-only user: it must never set the context (only the package
-- RAG_ACCESS_CTX_PKG, owned by the application user and granted to nobody, can).
--
-- Replace RAG_APP if you renamed the application user.

WHENEVER SQLERROR EXIT FAILURE

GRANT CREATE ANY CONTEXT TO RAG_APP;
GRANT EXECUTE ON SYS.DBMS_RLS TO RAG_APP;

EXIT
