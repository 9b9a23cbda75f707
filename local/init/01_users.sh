#!/bin/bash
# oracle-rag: database users for local development on gvenzl/oracle-free.
#
# When it runs: the image runs every *.sh and *.sql in /container-entrypoint-initdb.d once,
# on the first start of an empty data volume, after it has created ${APP_USER} itself
# (CREATE USER ... QUOTA UNLIMITED ON USERS; GRANT DB_DEVELOPER_ROLE). An executable script
# runs in a child shell; a non-executable one is *sourced* into the entrypoint, so this file
# keeps its variables inside a function, never calls `exit`, and works either way.
#
# Why a shell script and not a .sql file: the passwords come from the container environment
# (APP_USER_PASSWORD, RAG_RO_PASSWORD, set by compose.dev.yml from your shell), so no
# committed file holds one. They reach sqlplus on stdin (a here-document), never on a command
# line, and sit inside PL/SQL so that a failing statement cannot echo them into the log
# (SQL*Plus prints the offending line of a failing SQL statement, not of a PL/SQL block).
#
# What it does, as SYS, in FREEPDB1 (a .sql init script starts as SYS in the CDB root, so
# the first statement switches container):
#   * the application user (APP_USER): created only if the image did not already create it;
#     default tablespace USERS with unlimited quota. Never SYS or SYSTEM: their objects live
#     in the SYSTEM tablespace, which is not ASSM, and a vector index there fails with
#     ORA-51963. Grants: CREATE SESSION, TABLE, VIEW, SEQUENCE, PROCEDURE, TRIGGER and MINING
#     MODEL (ONNX models), EXECUTE ON SYS.DBMS_VECTOR (granted here as SYS: SYSTEM cannot
#     grant on SYS's packages, ORA-01031),
#     and DB_DEVELOPER_ROLE (what the image grants anyway; appropriate for a
#     development database, see docs/operations-oracle.md for a least-privilege production
#     list). Explicit grants matter because roles do not apply inside definer-rights PL/SQL.
#   * directory object ONNX_MODELS -> /opt/oracle/models (where compose.dev.yml mounts the
#     ONNX file), READ granted to the application user, for server-side model loads.
#   * the read-only user (RAG_RO_USER, default RAG_RO) for guarded, LLM-written queries:
#     CREATE SESSION only, no quota, ALTER USER ... READ ONLY (23ai and later), and private
#     synonyms RAG_RO.RAG_V_* -> APP_USER.RAG_V_* (local/readonly_synonyms.sql). READ on
#     the allow-listed views is granted later by the application user with
#     local/grant_readonly.sql, because those views only exist after `oracle-rag migrate`.
#
# Any failure stops the container: a half-initialised database is worse than none. Fix the
# cause, then `docker compose -f compose.dev.yml down -v` and start again. (The entrypoint
# already runs with these options; they matter when this file runs as its own process.)
set -Eeuo pipefail

rag_init_users() {
  local app_user="${APP_USER:?APP_USER is not set: compose.dev.yml passes it from your shell}"
  local app_pw="${APP_USER_PASSWORD:?APP_USER_PASSWORD is not set}"
  local ro_user="${RAG_RO_USER:-RAG_RO}"
  local ro_pw="${RAG_RO_PASSWORD:?RAG_RO_PASSWORD is not set}"
  local ident='^[A-Za-z][A-Za-z0-9_]{0,127}$'
  local name pw

  for name in "${app_user}" "${ro_user}"; do
    if [[ ! "${name}" =~ ${ident} ]]; then
      echo "01_users.sh: '${name}' is not a plain Oracle identifier (letter, then letters, digits, _)" >&2
      return 1
    fi
  done
  if [[ "${app_user^^}" == "${ro_user^^}" ]]; then
    echo "01_users.sh: the read-only user must differ from the application user" >&2
    return 1
  fi
  for pw in "${app_pw}" "${ro_pw}"; do
    # Quotes and line breaks cannot appear inside IDENTIFIED BY "..." or a PL/SQL literal.
    if [[ "${pw}" == *\"* || "${pw}" == *\'* || "${pw}" == *$'\n'* || "${pw}" == *$'\r'* ]]; then
      echo "01_users.sh: passwords must not contain quotes or line breaks" >&2
      return 1
    fi
  done

  echo "01_users.sh: configuring ${app_user^^} and ${ro_user^^} in FREEPDB1"
  sqlplus -s / as sysdba <<SQL
WHENEVER OSERROR EXIT FAILURE
WHENEVER SQLERROR EXIT FAILURE
SET DEFINE OFF
SET VERIFY OFF
SET FEEDBACK OFF
SET SERVEROUTPUT ON
ALTER SESSION SET CONTAINER=FREEPDB1;

DECLARE
  c_app    CONSTANT VARCHAR2(128)  := DBMS_ASSERT.SIMPLE_SQL_NAME(UPPER('${app_user}'));
  c_ro     CONSTANT VARCHAR2(128)  := DBMS_ASSERT.SIMPLE_SQL_NAME(UPPER('${ro_user}'));
  c_app_pw CONSTANT VARCHAR2(1024) := '${app_pw}';
  c_ro_pw  CONSTANT VARCHAR2(1024) := '${ro_pw}';

  PROCEDURE run(p_sql IN VARCHAR2) IS
  BEGIN
    EXECUTE IMMEDIATE p_sql;
  END;

  FUNCTION user_exists(p_name IN VARCHAR2) RETURN BOOLEAN IS
    k PLS_INTEGER;
  BEGIN
    SELECT COUNT(*) INTO k FROM dba_users WHERE username = p_name;
    RETURN k > 0;
  END;
BEGIN
  -- Application user. The image normally created it already (APP_USER).
  IF NOT user_exists(c_app) THEN
    run('CREATE USER ' || c_app || ' IDENTIFIED BY "' || c_app_pw || '"');
    DBMS_OUTPUT.PUT_LINE('created user ' || c_app);
  END IF;
  run('ALTER USER ' || c_app || ' DEFAULT TABLESPACE USERS QUOTA UNLIMITED ON USERS');
  FOR g IN (
    SELECT column_value AS priv
      FROM TABLE(sys.odcivarchar2list(
             'CREATE SESSION', 'CREATE TABLE', 'CREATE VIEW', 'CREATE SEQUENCE',
             'CREATE PROCEDURE', 'CREATE TRIGGER', 'CREATE MINING MODEL',
             'DB_DEVELOPER_ROLE'))
  ) LOOP
    run('GRANT ' || g.priv || ' TO ' || c_app);
  END LOOP;
  run('GRANT EXECUTE ON SYS.DBMS_VECTOR TO ' || c_app);

  -- Server-side model loads: DBMS_VECTOR.LOAD_ONNX_MODEL('ONNX_MODELS', 'all-MiniLM-L6-v2.onnx', ...).
  run(q'[CREATE OR REPLACE DIRECTORY ONNX_MODELS AS '/opt/oracle/models']');
  run('GRANT READ ON DIRECTORY ONNX_MODELS TO ' || c_app);

  -- Read-only user for guarded queries: CREATE SESSION and nothing else here.
  IF NOT user_exists(c_ro) THEN
    run('CREATE USER ' || c_ro || ' IDENTIFIED BY "' || c_ro_pw || '" DEFAULT TABLESPACE USERS QUOTA 0 ON USERS');
    DBMS_OUTPUT.PUT_LINE('created user ' || c_ro);
  END IF;
  run('GRANT CREATE SESSION TO ' || c_ro);
  -- Private synonyms for the allow-listed views (local/readonly_synonyms.sql): the guarded
  -- path then needs no ALTER SESSION SET CURRENT_SCHEMA. A synonym may precede its view.
  FOR v IN (SELECT column_value AS name FROM TABLE(sys.odcivarchar2list(
              'RAG_V_TASK', 'RAG_V_SPRINT', 'RAG_V_PROJECT', 'RAG_V_EMPLOYEE'))) LOOP
    run('CREATE OR REPLACE SYNONYM ' || c_ro || '.' || v.name || ' FOR ' || c_app || '.' || v.name);
  END LOOP;
  BEGIN
    run('ALTER USER ' || c_ro || ' READ ONLY');
    DBMS_OUTPUT.PUT_LINE(c_ro || ' is a READ ONLY user');
  EXCEPTION
    WHEN OTHERS THEN
      -- ORA-00922/ORA-02000: a release before read-only users (23ai). The application still
      -- runs guarded queries in SET TRANSACTION READ ONLY with SELECT-only grants.
      IF SQLCODE IN (-922, -2000) THEN
        DBMS_OUTPUT.PUT_LINE('WARNING: ALTER USER ... READ ONLY is not supported here');
      ELSE
        RAISE;
      END IF;
  END;
END;
/
EXIT
SQL
  echo "01_users.sh: done"
}

rag_init_users
unset -f rag_init_users
