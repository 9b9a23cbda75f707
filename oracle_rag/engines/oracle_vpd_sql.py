"""Oracle's second wall for declared access (issue 23): VPD policies on RAG_CHUNK, RAG_CHUNK_ACL, RAG_CHUNK_TERM.

``oracle-rag provision --vpd`` creates, in the application schema:

* the application context ``RAG_ACCESS_CTX``, settable only through the
  package ``RAG_ACCESS_CTX_PKG`` (``CREATE CONTEXT ... USING``), which the
  schema owns and grants to nobody: the read-only user that runs
  model-written SQL cannot set it;
* the package: ``SET_CALLER(caller_id, see_all, groups_json)``,
  ``SET_SYSTEM`` (the product's own writer sessions), ``CLEAR_CALLER``
  (``DBMS_SESSION.CLEAR_ALL_CONTEXT``), and the policy functions;
* ``DBMS_RLS.ADD_POLICY`` on RAG_CHUNK, RAG_CHUNK_ACL and RAG_CHUNK_TERM for SELECT,
  ``CONTEXT_SENSITIVE`` (the predicate is re-evaluated when the context
  changes, Oracle's documented policy type for context-driven predicates).

The predicate is the same rule as ``engine_sql.SCOPE`` with the caller read
from the context: see-all or system mode: no restriction; a caller:
public, owned, or one of the caller's groups (a JSON array in the context,
expanded by JSON_TABLE), unless the source's permission data failed; no
context: the same rule for the guarded session's caller (the
``RAG_GUARDED_CALLER`` row of its CLIENT_IDENTIFIER token, what the
aggregate views read), and nothing at all without such a row (fail
closed). So a statement that forgets the predicate still returns nothing
it should not. The BM25 postings carry their record's access columns (V13)
and the keyword statement reads them without RAG_CHUNK, so they get the
same rule (``TERM_PREDICATE``: the group test by CHUNK_ID, as the postings
have no SOURCE_ID); a session with no context reads no posting (the guarded
user's aggregate views do not read them).

Nothing can run Oracle here: tests/test_oracle_golden.py pins the text and
docs/oracle-reference.md says what was verified where.
"""

from __future__ import annotations

from .statements import Sql

CONTEXT = "RAG_ACCESS_CTX"

CREATE_CONTEXT = Sql(oracle="CREATE OR REPLACE CONTEXT RAG_ACCESS_CTX USING RAG_ACCESS_CTX_PKG")

CREATE_PACKAGE = Sql(oracle="""CREATE OR REPLACE PACKAGE RAG_ACCESS_CTX_PKG AS
  PROCEDURE SET_CALLER(p_caller_id IN NUMBER, p_see_all IN NUMBER, p_groups IN VARCHAR2);
  PROCEDURE SET_SYSTEM;
  PROCEDURE CLEAR_CALLER;
  FUNCTION CHUNK_PREDICATE(p_schema IN VARCHAR2, p_object IN VARCHAR2) RETURN VARCHAR2;
  FUNCTION ACL_PREDICATE(p_schema IN VARCHAR2, p_object IN VARCHAR2) RETURN VARCHAR2;
  FUNCTION TERM_PREDICATE(p_schema IN VARCHAR2, p_object IN VARCHAR2) RETURN VARCHAR2;
END RAG_ACCESS_CTX_PKG;""")

# The groups: the caller's groups as a JSON array (at most 4000 bytes: a context value's limit).
# SYS_CONTEXT returns at most 256 bytes unless its third argument asks for more (up to 4000):
# without it a longer array came back cut, the JSON was invalid and the caller lost every group.
_GROUPS = ("SELECT jt.g FROM JSON_TABLE(SYS_CONTEXT(''RAG_ACCESS_CTX'', ''GROUPS'', 4000), ''$[*]'' "
           "COLUMNS (g VARCHAR2(200 CHAR) PATH ''$'')) jt")

# A session with no context may still be a guarded (read-only) session reading the aggregate views
# (engines/guarded_scope_sql.py): it cannot set this context (it may not run the package), so its
# caller is the RAG_GUARDED_CALLER row of the token it carries as CLIENT_IDENTIFIER, the rows the
# views themselves read. No such row: nothing (fail closed). The subqueries run with the policy
# function owner's rights (DBMS_RLS overview), so the read-only user needs no grant on them.
_TOKEN = "SYS_CONTEXT(''USERENV'', ''CLIENT_IDENTIFIER'')"
_GUARDED_KNOWN = f"{_TOKEN} IN (SELECT g.TOKEN FROM RAG_GUARDED_CALLER g)"
_GUARDED_SEE_ALL = f"{_TOKEN} IN (SELECT g.TOKEN FROM RAG_GUARDED_CALLER g WHERE g.SEE_ALL = 1)"
_GUARDED_GROUPS = f"SELECT gg.PRINCIPAL FROM RAG_GUARDED_GROUP gg WHERE gg.TOKEN = {_TOKEN}"

CREATE_PACKAGE_BODY = Sql(oracle=f"""CREATE OR REPLACE PACKAGE BODY RAG_ACCESS_CTX_PKG AS
  PROCEDURE SET_CALLER(p_caller_id IN NUMBER, p_see_all IN NUMBER, p_groups IN VARCHAR2) IS
  BEGIN
    DBMS_SESSION.CLEAR_ALL_CONTEXT('RAG_ACCESS_CTX');
    DBMS_SESSION.SET_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID', TO_CHAR(p_caller_id));
    DBMS_SESSION.SET_CONTEXT('RAG_ACCESS_CTX', 'SEE_ALL', CASE WHEN p_see_all = 1 THEN '1' ELSE '0' END);
    DBMS_SESSION.SET_CONTEXT('RAG_ACCESS_CTX', 'GROUPS', NVL(p_groups, '[]'));
  END SET_CALLER;

  PROCEDURE SET_SYSTEM IS
  BEGIN
    DBMS_SESSION.CLEAR_ALL_CONTEXT('RAG_ACCESS_CTX');
    DBMS_SESSION.SET_CONTEXT('RAG_ACCESS_CTX', 'SYSTEM', '1');
  END SET_SYSTEM;

  PROCEDURE CLEAR_CALLER IS
  BEGIN
    DBMS_SESSION.CLEAR_ALL_CONTEXT('RAG_ACCESS_CTX');
  END CLEAR_CALLER;

  FUNCTION UNRESTRICTED RETURN BOOLEAN IS
  BEGIN
    RETURN SYS_CONTEXT('RAG_ACCESS_CTX', 'SYSTEM') = '1'
        OR (SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID') IS NOT NULL
            AND SYS_CONTEXT('RAG_ACCESS_CTX', 'SEE_ALL') = '1');
  END UNRESTRICTED;

  FUNCTION CHUNK_PREDICATE(p_schema IN VARCHAR2, p_object IN VARCHAR2) RETURN VARCHAR2 IS
  BEGIN
    IF UNRESTRICTED THEN
      RETURN NULL;
    ELSIF SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID') IS NULL THEN
      RETURN '{_GUARDED_KNOWN} AND ({_GUARDED_SEE_ALL} '
          || 'OR (SOURCE_TYPE NOT IN (SELECT f.SOURCE_TYPE FROM RAG_ACCESS_FAILURE f) AND (ACCESS_PUBLIC = 1 '
          || 'OR ACCESS_OWNER IN (SELECT g.CALLER_ID FROM RAG_GUARDED_CALLER g WHERE g.TOKEN = {_TOKEN}) '
          || 'OR (SOURCE_TYPE, SOURCE_ID) IN (SELECT a.SOURCE_TYPE, a.SOURCE_ID FROM RAG_CHUNK_ACL a '
          || 'WHERE a.PRINCIPAL IN ({_GUARDED_GROUPS})))))';
    END IF;
    RETURN 'SOURCE_TYPE NOT IN (SELECT f.SOURCE_TYPE FROM RAG_ACCESS_FAILURE f) AND (ACCESS_PUBLIC = 1 '
        || 'OR ACCESS_OWNER = TO_NUMBER(SYS_CONTEXT(''RAG_ACCESS_CTX'', ''CALLER_ID'')) '
        || 'OR (SOURCE_TYPE, SOURCE_ID) IN (SELECT a.SOURCE_TYPE, a.SOURCE_ID FROM RAG_CHUNK_ACL a '
        || 'WHERE a.PRINCIPAL IN ({_GROUPS})))';
  END CHUNK_PREDICATE;

  FUNCTION ACL_PREDICATE(p_schema IN VARCHAR2, p_object IN VARCHAR2) RETURN VARCHAR2 IS
  BEGIN
    IF UNRESTRICTED THEN
      RETURN NULL;
    ELSIF SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID') IS NULL THEN
      RETURN '{_GUARDED_KNOWN} AND ({_GUARDED_SEE_ALL} OR PRINCIPAL IN ({_GUARDED_GROUPS}))';
    END IF;
    RETURN 'PRINCIPAL IN ({_GROUPS})';
  END ACL_PREDICATE;

  FUNCTION TERM_PREDICATE(p_schema IN VARCHAR2, p_object IN VARCHAR2) RETURN VARCHAR2 IS
  BEGIN
    IF UNRESTRICTED THEN
      RETURN NULL;
    ELSIF SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID') IS NULL THEN
      RETURN '1 = 0';
    END IF;
    RETURN 'SOURCE_TYPE NOT IN (SELECT f.SOURCE_TYPE FROM RAG_ACCESS_FAILURE f) AND (ACCESS_PUBLIC = 1 '
        || 'OR ACCESS_OWNER = TO_NUMBER(SYS_CONTEXT(''RAG_ACCESS_CTX'', ''CALLER_ID'')) '
        || 'OR CHUNK_ID IN (SELECT c.CHUNK_ID FROM RAG_CHUNK c JOIN RAG_CHUNK_ACL a '
        || 'ON a.SOURCE_TYPE = c.SOURCE_TYPE AND a.SOURCE_ID = c.SOURCE_ID '
        || 'WHERE a.PRINCIPAL IN ({_GROUPS})))';
  END TERM_PREDICATE;
END RAG_ACCESS_CTX_PKG;""")


def _add_policy(table: str, policy: str, function: str) -> Sql:
    """Drop the policy if it exists (ORA-28102: it does not), then add it: provisioning can be re-run."""
    return Sql(oracle=f"""DECLARE
  no_policy EXCEPTION;
  PRAGMA EXCEPTION_INIT(no_policy, -28102);
BEGIN
  BEGIN
    DBMS_RLS.DROP_POLICY(object_schema => SYS_CONTEXT('USERENV', 'CURRENT_SCHEMA'),
                         object_name => '{table}', policy_name => '{policy}');
  EXCEPTION
    WHEN no_policy THEN NULL;
  END;
  DBMS_RLS.ADD_POLICY(object_schema => SYS_CONTEXT('USERENV', 'CURRENT_SCHEMA'),
                      object_name => '{table}',
                      policy_name => '{policy}',
                      function_schema => SYS_CONTEXT('USERENV', 'CURRENT_SCHEMA'),
                      policy_function => 'RAG_ACCESS_CTX_PKG.{function}',
                      statement_types => 'SELECT',
                      policy_type => DBMS_RLS.CONTEXT_SENSITIVE);
END;""")


ADD_CHUNK_POLICY = _add_policy("RAG_CHUNK", "RAG_CHUNK_ACCESS", "CHUNK_PREDICATE")
ADD_ACL_POLICY = _add_policy("RAG_CHUNK_ACL", "RAG_CHUNK_ACL_ACCESS", "ACL_PREDICATE")
ADD_TERM_POLICY = _add_policy("RAG_CHUNK_TERM", "RAG_CHUNK_TERM_ACCESS", "TERM_PREDICATE")

# What provisioning runs, in order.
PROVISION = (CREATE_CONTEXT, CREATE_PACKAGE, CREATE_PACKAGE_BODY, ADD_CHUNK_POLICY, ADD_ACL_POLICY, ADD_TERM_POLICY)

# Per pooled connection: a caller's reads, the product's own writes, and the return to the pool.
SET_CALLER = Sql(oracle="BEGIN RAG_ACCESS_CTX_PKG.SET_CALLER(:caller_id, :see_all, :groups); END;")
SET_SYSTEM = Sql(oracle="BEGIN RAG_ACCESS_CTX_PKG.SET_SYSTEM; END;")
CLEAR_CALLER = Sql(oracle="BEGIN RAG_ACCESS_CTX_PKG.CLEAR_CALLER; END;")
