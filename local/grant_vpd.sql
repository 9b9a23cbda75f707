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
--
-- Autonomous Database: ADMIN is not SYS. Its GRANT ANY OBJECT PRIVILEGE "can't be exercised against
-- Oracle maintained schema such as SYSTEM or SYS" and GRANT ANY PRIVILEGE is not available to it
-- (Autonomous Database, "ADMIN User Roles and Privileges"), so the two grants below work there only
-- where ADMIN holds them itself WITH GRANT OPTION / WITH ADMIN OPTION. Check first, as ADMIN:
--
--   SELECT privilege, grantable FROM dba_tab_privs
--    WHERE grantee = 'ADMIN' AND owner = 'SYS' AND table_name = 'DBMS_RLS';
--   SELECT privilege, admin_option FROM dba_sys_privs
--    WHERE grantee = 'ADMIN' AND privilege = 'CREATE ANY CONTEXT';
--
-- GRANTABLE = 'YES' and ADMIN_OPTION = 'YES': run this file. Otherwise a grant fails with ORA-01031:
-- EXECUTE ON DBMS_RLS also comes with DB_DEVELOPER_ROLE (ADMIN holds GRANT ANY ROLE:
-- `GRANT DB_DEVELOPER_ROLE TO RAG_APP`); CREATE ANY CONTEXT has no such route, and without it the VPD
-- second wall cannot be provisioned on that database: leave access_vpd unset (the scope predicate in
-- every statement is the access rule; the policies only repeat it).

WHENEVER SQLERROR EXIT FAILURE

GRANT CREATE ANY CONTEXT TO RAG_APP;
GRANT EXECUTE ON SYS.DBMS_RLS TO RAG_APP;

EXIT
