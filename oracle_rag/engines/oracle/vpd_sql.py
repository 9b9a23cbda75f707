"""Oracle's second wall for declared access: VPD policies on RAG_CHUNK, RAG_CHUNK_ACL, RAG_CHUNK_TERM.

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

The predicates are not written here: each policy function returns text
made by ``scope_sql``'s one generator (``scope_predicate``, and
``acl_predicate`` for the ACL rows), the generator every read statement
and the guarded views use, with the caller read from the context instead
of binds (``CONTEXT_CALLER``), the row's columns unqualified (the predicate
is the WHERE clause of a view over the one table), and the group test as a
row-value IN on RAG_CHUNK (its policy must not read RAG_CHUNK). So a change
of the rule changes both walls at once. What the package decides itself:
see-all or system mode: no predicate (NULL); a caller: the generated
predicate; no context: the same predicate for the guarded session's caller
(``guarded_scope_sql.guarded_caller``: the ``RAG_GUARDED_CALLER`` row of
its CLIENT_IDENTIFIER token, what the aggregate views read), behind
``caller_known`` so that a session without such a row reads nothing (fail
closed). So a statement that forgets the predicate still returns nothing
it should not. The BM25 postings carry their record's access columns (V13)
and the keyword statement reads them without RAG_CHUNK, so they get the
same generated rule (the group test by CHUNK_ID: the postings have no
SOURCE_ID); a session with no context reads no posting (the guarded
user's aggregate views do not read them).

Nothing can run Oracle here: tests/test_oracle_golden.py pins the text,
tests/test_vpd_predicate.py decodes each function's returned text from the
package, checks it is the generator's and evaluates it on SQLite against the
bind form, and docs/oracle-reference.md says what was verified where.
"""

from __future__ import annotations

import textwrap

from oracle_rag.engines.guarded_scope_sql import caller_known, guarded_caller
from oracle_rag.engines.scope_sql import CallerSql, acl_predicate, scope_predicate
from oracle_rag.engines.statements import Sql

CONTEXT = "RAG_ACCESS_CTX"

# The namespace is database-wide (a context lives in SYS, one per name): a second schema's
# CREATE OR REPLACE would re-bind it to its own package, and this schema's SET_SYSTEM would fail
# with ORA-01031 from then on. So provisioning never takes a namespace over: when this schema's
# package can already set the context, the context is this schema's (nothing to do); otherwise it
# is created without OR REPLACE, which fails when the name exists, bound to another schema's
# package (or the privilege is missing): refused with Oracle's own error attached. Runs after the
# package exists (the probe calls it; CREATE CONTEXT ... USING may name a package created later).
ENSURE_CONTEXT = Sql(
    oracle="""DECLARE
  ours BOOLEAN := TRUE;
BEGIN
  BEGIN
    EXECUTE IMMEDIATE 'BEGIN RAG_ACCESS_CTX_PKG.SET_SYSTEM; RAG_ACCESS_CTX_PKG.CLEAR_CALLER; END;';
  EXCEPTION
    WHEN OTHERS THEN ours := FALSE;
  END;
  IF NOT ours THEN
    BEGIN
      EXECUTE IMMEDIATE 'CREATE CONTEXT RAG_ACCESS_CTX USING RAG_ACCESS_CTX_PKG';
    EXCEPTION
      WHEN OTHERS THEN
        RAISE_APPLICATION_ERROR(-20001, 'the application context RAG_ACCESS_CTX exists and this schema''s '
          || 'RAG_ACCESS_CTX_PKG cannot set it (another schema provisioned it, one namespace per database), '
          || 'or it could not be created: ' || SQLERRM);
    END;
  END IF;
END;"""
)

CREATE_PACKAGE = Sql(
    oracle="""CREATE OR REPLACE PACKAGE RAG_ACCESS_CTX_PKG AS
  PROCEDURE SET_CALLER(p_caller_id IN NUMBER, p_see_all IN NUMBER, p_groups IN CLOB);
  PROCEDURE SET_SYSTEM;
  PROCEDURE CLEAR_CALLER;
  FUNCTION CALLER_GROUPS RETURN CLOB;
  FUNCTION CHUNK_PREDICATE(p_schema IN VARCHAR2, p_object IN VARCHAR2) RETURN VARCHAR2;
  FUNCTION ACL_PREDICATE(p_schema IN VARCHAR2, p_object IN VARCHAR2) RETURN VARCHAR2;
  FUNCTION TERM_PREDICATE(p_schema IN VARCHAR2, p_object IN VARCHAR2) RETURN VARCHAR2;
END RAG_ACCESS_CTX_PKG;"""
)

# The caller read from the context: its id and see-all flag. The groups are not a context value:
# DBMS_SESSION.SET_CONTEXT takes at most 4 KB per value (and SYS_CONTEXT returns at most 4000
# bytes), so a caller whose groups' JSON array is longer would lose some or all of its groups on
# Oracle only. SET_CALLER keeps the array in a package variable of the session (a CLOB: any
# number of groups) and the predicate reads it through CALLER_GROUPS, a function of the same
# package (the one the context names, owned by the schema, granted to nobody).
CONTEXT_CALLER = CallerSql(
    caller_id="TO_NUMBER(SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID'))",
    see_all="TO_NUMBER(SYS_CONTEXT('RAG_ACCESS_CTX', 'SEE_ALL'))",
    groups="(SELECT jt.g FROM JSON_TABLE(RAG_ACCESS_CTX_PKG.CALLER_GROUPS, '$[*]' "
    "COLUMNS (g VARCHAR2(400 CHAR) PATH '$')) jt)",
)
# A session with no context may still be a guarded (read-only) session reading the aggregate views
# (engines/guarded_scope_sql.py): it cannot set this context (it may not run the package), so its
# caller is the RAG_GUARDED_CALLER row of the token it carries as CLIENT_IDENTIFIER, the rows the
# views themselves read. No such row: nothing (fail closed). The subqueries run with the policy
# function owner's rights (DBMS_RLS overview), so the read-only user needs no grant on them.
GUARDED_CALLER = guarded_caller("oracle")
_GUARDED_KNOWN = caller_known("oracle")


def chunk_predicate(caller: CallerSql) -> str:
    """RAG_CHUNK's policy: the scope rule over the row itself (the group test must not read RAG_CHUNK)."""
    return scope_predicate("", caller, group_test="records")


def term_predicate(caller: CallerSql) -> str:
    """RAG_CHUNK_TERM's policy: the scope rule over a posting's carried columns, the group test
    by CHUNK_ID."""
    return scope_predicate("", caller, group_test="chunks")


# What each policy function returns, per kind of session (see-all and system mode: NULL).
PREDICATES = {
    "CHUNK_PREDICATE": (
        chunk_predicate(CONTEXT_CALLER),
        f"{_GUARDED_KNOWN} AND {chunk_predicate(GUARDED_CALLER)}",
    ),
    "ACL_PREDICATE": (acl_predicate(CONTEXT_CALLER), f"{_GUARDED_KNOWN} AND {acl_predicate(GUARDED_CALLER)}"),
    "TERM_PREDICATE": (term_predicate(CONTEXT_CALLER), "1 = 0"),
}


def plsql_string(text: str, indent: str = "      ") -> str:
    """``text`` as a PL/SQL string expression: quotes doubled, cut at spaces into lines joined by ``||``."""
    pieces = textwrap.wrap(
        text.replace("'", "''"), 100, break_long_words=False, break_on_hyphens=False, drop_whitespace=False
    )
    return f"\n{indent}|| ".join(f"'{piece}'" for piece in pieces)


def _policy_function(name: str) -> str:
    caller, guarded = PREDICATES[name]
    return f"""  FUNCTION {name}(p_schema IN VARCHAR2, p_object IN VARCHAR2) RETURN VARCHAR2 IS
  BEGIN
    IF UNRESTRICTED THEN
      RETURN NULL;
    ELSIF SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID') IS NULL THEN
      RETURN {plsql_string(guarded, "        ")};
    END IF;
    RETURN {plsql_string(caller)};
  END {name};"""


CREATE_PACKAGE_BODY = Sql(
    oracle=f"""CREATE OR REPLACE PACKAGE BODY RAG_ACCESS_CTX_PKG AS
  -- The caller's groups, a JSON array: session state, any length (a context value holds 4 KB).
  g_groups CLOB;

  PROCEDURE SET_CALLER(p_caller_id IN NUMBER, p_see_all IN NUMBER, p_groups IN CLOB) IS
  BEGIN
    DBMS_SESSION.CLEAR_ALL_CONTEXT('RAG_ACCESS_CTX');
    g_groups := NVL(p_groups, '[]');
    DBMS_SESSION.SET_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID', TO_CHAR(p_caller_id));
    DBMS_SESSION.SET_CONTEXT('RAG_ACCESS_CTX', 'SEE_ALL', CASE WHEN p_see_all = 1 THEN '1' ELSE '0' END);
  END SET_CALLER;

  PROCEDURE SET_SYSTEM IS
  BEGIN
    DBMS_SESSION.CLEAR_ALL_CONTEXT('RAG_ACCESS_CTX');
    g_groups := NULL;
    DBMS_SESSION.SET_CONTEXT('RAG_ACCESS_CTX', 'SYSTEM', '1');
  END SET_SYSTEM;

  PROCEDURE CLEAR_CALLER IS
  BEGIN
    DBMS_SESSION.CLEAR_ALL_CONTEXT('RAG_ACCESS_CTX');
    g_groups := NULL;
  END CLEAR_CALLER;

  -- Read by the policies' predicates; a session with no caller set has no groups.
  FUNCTION CALLER_GROUPS RETURN CLOB IS
  BEGIN
    RETURN CASE WHEN SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID') IS NULL THEN '[]' ELSE NVL(g_groups, '[]') END;
  END CALLER_GROUPS;

  -- The rule's see-all arm, decided once per parse rather than per row: no predicate at all.
  FUNCTION UNRESTRICTED RETURN BOOLEAN IS
  BEGIN
    RETURN SYS_CONTEXT('RAG_ACCESS_CTX', 'SYSTEM') = '1'
        OR (SYS_CONTEXT('RAG_ACCESS_CTX', 'CALLER_ID') IS NOT NULL
            AND SYS_CONTEXT('RAG_ACCESS_CTX', 'SEE_ALL') = '1');
  END UNRESTRICTED;

{_policy_function("CHUNK_PREDICATE")}

{_policy_function("ACL_PREDICATE")}

{_policy_function("TERM_PREDICATE")}
END RAG_ACCESS_CTX_PKG;"""
)


def _add_policy(table: str, policy: str, function: str) -> Sql:
    """Drop the policy if it exists (ORA-28102: it does not), then add it: provisioning can be re-run."""
    return Sql(
        oracle=f"""DECLARE
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
END;"""
    )


ADD_CHUNK_POLICY = _add_policy("RAG_CHUNK", "RAG_CHUNK_ACCESS", "CHUNK_PREDICATE")
ADD_ACL_POLICY = _add_policy("RAG_CHUNK_ACL", "RAG_CHUNK_ACL_ACCESS", "ACL_PREDICATE")
ADD_TERM_POLICY = _add_policy("RAG_CHUNK_TERM", "RAG_CHUNK_TERM_ACCESS", "TERM_PREDICATE")

# What provisioning runs, in order: the package first (the context check calls it), its compile
# state checked (PACKAGE_STATUS) before the context and the policies that name it.
PROVISION = (
    CREATE_PACKAGE,
    CREATE_PACKAGE_BODY,
    ENSURE_CONTEXT,
    ADD_CHUNK_POLICY,
    ADD_ACL_POLICY,
    ADD_TERM_POLICY,
)

# CREATE [OR REPLACE] PACKAGE [BODY] with compilation errors does not raise: python-oracledb only
# sets DPY-7000 as the cursor's warning, and every policy naming an invalid package then fails its
# table's reads (fail closed, but with a confusing error). So the package's objects are read back:
# both must be VALID, and USER_ERRORS says why not.
PACKAGE_STATUS = Sql(
    oracle="""SELECT o.OBJECT_TYPE, o.STATUS,
       (SELECT LISTAGG(e.LINE || ': ' || e.TEXT, '; ') WITHIN GROUP (ORDER BY e.SEQUENCE)
        FROM USER_ERRORS e WHERE e.NAME = o.OBJECT_NAME AND e.TYPE = o.OBJECT_TYPE) AS ERRORS
FROM USER_OBJECTS o
WHERE o.OBJECT_NAME = 'RAG_ACCESS_CTX_PKG' AND o.OBJECT_TYPE IN ('PACKAGE', 'PACKAGE BODY')
ORDER BY o.OBJECT_TYPE"""
)

# Per pooled connection: a caller's reads, the product's own writes, and the return to the pool.
SET_CALLER = Sql(oracle="BEGIN RAG_ACCESS_CTX_PKG.SET_CALLER(:caller_id, :see_all, :groups); END;")
SET_SYSTEM = Sql(oracle="BEGIN RAG_ACCESS_CTX_PKG.SET_SYSTEM; END;")
CLEAR_CALLER = Sql(oracle="BEGIN RAG_ACCESS_CTX_PKG.CLEAR_CALLER; END;")

# Before the product's own work (migrate, bootstrap, the worker, index rebuild): do the policies
# exist, and does this session hold the system context? Policies without it = a session that reads
# no RAG_CHUNK row: a worker would write records without postings (INSERT_TERM reads chunk 0) and
# a migration that copies from RAG_CHUNK would copy nothing. USER_POLICIES lists the VPD policies
# on the objects the current user owns (Database Reference).
SESSION_ACCESS = Sql(
    oracle="""SELECT (SELECT COUNT(*) FROM USER_POLICIES
        WHERE OBJECT_NAME IN ('RAG_CHUNK', 'RAG_CHUNK_ACL', 'RAG_CHUNK_TERM')) AS POLICIES,
       SYS_CONTEXT('RAG_ACCESS_CTX', 'SYSTEM') AS SYSTEM_CONTEXT
FROM dual"""
)
