"""The PL/SQL that puts the embedding model into Oracle, once.

Both blocks do the same thing around a different load call:

1. lock the row ``TASK = 'MODEL_LOAD'`` of RAG_MAINTENANCE (V7) with
   ``SELECT ... FOR UPDATE WAIT``, so two deploys at once run check-and-load
   one after the other: the second waits, then finds the model and reports
   ``SKIPPED`` ("already loaded"), not an error. The row is inserted first if
   missing, in an autonomous transaction that commits on its own (two
   sessions inserting it at once: the second gets DUP_VAL_ON_INDEX, which
   means "it is there"). A row lock of our own table needs no grant at all;
   ``DBMS_LOCK`` needed ``EXECUTE ON SYS.DBMS_LOCK``, which SYSTEM cannot
   grant in gvenzl/oracle-free and ADMIN cannot grant on Autonomous Database
   (ORA-01031). The statements on RAG_MAINTENANCE are dynamic SQL (the task
   name a fixed literal: no ``:word`` inside a string) so the
   block still compiles before ``oracle-rag migrate`` created the table: then
   ORA-00942 is caught and the load runs unlocked (step 4 still makes a
   concurrent load a success);
2. look the model up in ``USER_MINING_MODELS`` *inside* the block, so a
   deploy that finds it does nothing (``SKIPPED``) and a re-run costs one
   query;
3. with ``:replace = 1``, drop it first (``DROP_ONNX_MODEL(force => TRUE)``);
4. load it; if the load fails and the model exists afterwards, a session
   that did not take the lock (an older oracle-rag, a DBA's script, a load
   before migrate) loaded it meanwhile: that is success, reported as
   ``CONCURRENT``. Anything else is re-raised.

The drop and the load run in an autonomous transaction (a nested procedure
with ``PRAGMA AUTONOMOUS_TRANSACTION``, PL/SQL Language Reference): creating
a model is DDL and commits, and a commit in the main transaction would
release the row lock half way. The row lock is released when the caller
commits or rolls back, i.e. on every path, and with the session.

Every value is a bind: the model name (``:model_name``, validated as an
identifier by :func:`oracle_rag.indexing.provision.model_identifier` and passed as a
string, never formatted in), the file bytes (``:model_data``, a BLOB) or the
pre-authenticated URL (``:uri``), the replace flag and the ``:outcome`` OUT
bind. The metadata is fixed: string input tensor ``input`` fed from the
``DATA`` attribute, output tensor ``embedding`` (what ``oracle-rag model
build`` writes, and Oracle's own default). ``tests/test_oracle_golden.py``
pins both blocks; ``sql/oracle/load_model.sql`` is the same logic for DBAs.
"""

from __future__ import annotations

from oracle_rag.engines.statements import Sql

METADATA = '{"function":"embedding","embeddingOutput":"embedding","input":{"input":["DATA"]}}'

OUTCOMES = ("LOADED", "REPLACED", "SKIPPED", "CONCURRENT")


LOCK_WAIT_S = 900
"""How long a deploy waits for another one's model load (seconds) before it fails (ORA-30006)."""

LOCK_TASK = "MODEL_LOAD"
"""The RAG_MAINTENANCE row whose lock serialises model loads; its DONE_AT is the last load."""


def _load_block(load_call: str, binds: str) -> Sql:
    return Sql(
        oracle=f"""DECLARE
  c_name    CONSTANT VARCHAR2(128) := :model_name;
  c_replace CONSTANT BOOLEAN := (:replace = 1);
{binds}
  l_found   PLS_INTEGER;
  l_outcome VARCHAR2(16);
  l_locked  BOOLEAN := FALSE;
  l_task    VARCHAR2(32);
  e_no_table EXCEPTION;
  PRAGMA EXCEPTION_INIT(e_no_table, -942);

  -- The lock row must exist before it can be locked: inserted and committed on its own.
  PROCEDURE ensure_lock_row IS
    PRAGMA AUTONOMOUS_TRANSACTION;
  BEGIN
    EXECUTE IMMEDIATE 'INSERT INTO RAG_MAINTENANCE (TASK, DONE_AT, CHUNKS) VALUES (''{LOCK_TASK}'', SYSTIMESTAMP, 0)';
    COMMIT;
  EXCEPTION
    WHEN DUP_VAL_ON_INDEX THEN
      ROLLBACK;
  END;

  -- Creating a model commits: in its own transaction, so our row lock is kept.
  PROCEDURE load IS
    PRAGMA AUTONOMOUS_TRANSACTION;
  BEGIN
    IF l_found > 0 THEN
      DBMS_VECTOR.DROP_ONNX_MODEL(model_name => c_name, force => TRUE);
    END IF;
{load_call}
    COMMIT;
  EXCEPTION
    WHEN OTHERS THEN
      ROLLBACK;
      RAISE;
  END;
BEGIN
  BEGIN
    ensure_lock_row;
    EXECUTE IMMEDIATE 'SELECT TASK FROM RAG_MAINTENANCE WHERE TASK = ''{LOCK_TASK}'' FOR UPDATE WAIT {LOCK_WAIT_S}'
      INTO l_task;
    l_locked := TRUE;
  EXCEPTION
    WHEN e_no_table THEN
      NULL;  -- before `oracle-rag migrate`: no lock table; the re-check below still makes a race a success
  END;
  SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name;
  IF l_found > 0 AND NOT c_replace THEN
    l_outcome := 'SKIPPED';
  ELSE
    BEGIN
      load;
      l_outcome := CASE WHEN l_found > 0 THEN 'REPLACED' ELSE 'LOADED' END;
    EXCEPTION
      WHEN OTHERS THEN
        -- A session that took no lock may have loaded it since our check: then it is there (success).
        SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name;
        IF l_found = 0 THEN
          RAISE;
        END IF;
        l_outcome := 'CONCURRENT';
    END;
    IF l_locked THEN
      EXECUTE IMMEDIATE 'UPDATE RAG_MAINTENANCE SET DONE_AT = SYSTIMESTAMP WHERE TASK = ''{LOCK_TASK}''';
    END IF;
  END IF;
  :outcome := l_outcome;
END;"""
    )


# A local file, sent by the client as a BLOB: no DIRECTORY object needed.
LOAD_MODEL_BLOB = _load_block(
    "    DBMS_VECTOR.LOAD_ONNX_MODEL(\n"
    "      model_name => c_name,\n"
    "      model_data => c_data,\n"
    f"      metadata   => JSON('{METADATA}'));",
    "  c_data    CONSTANT BLOB := :model_data;",
)

# A pre-authenticated Object Storage URL, fetched by the database itself.
# credential => NULL because the PAR URL is its own (bearer) credential.
LOAD_MODEL_CLOUD = _load_block(
    "    DBMS_VECTOR.LOAD_ONNX_MODEL_CLOUD(\n"
    "      model_name => c_name,\n"
    "      credential => NULL,\n"
    "      uri        => c_uri,\n"
    f"      metadata   => JSON('{METADATA}'));",
    "  c_uri     CONSTANT VARCHAR2(4000) := :uri;",
)

# Drop a model only when USER_MINING_MODELS lists it. DROP_ONNX_MODEL's
# force => TRUE drops a model that is *invalid*; a missing one still raises
# ORA-40284 ("model does not exist"), which failed the test setup on a fresh
# database. Used by `provision.drop_model` (tests and operators).
DROP_MODEL = Sql(
    oracle="""DECLARE
  c_name  CONSTANT VARCHAR2(128) := :model_name;
  l_found PLS_INTEGER;
BEGIN
  SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name;
  IF l_found > 0 THEN
    DBMS_VECTOR.DROP_ONNX_MODEL(model_name => c_name, force => TRUE);
  END IF;
  :outcome := CASE WHEN l_found > 0 THEN 'DROPPED' ELSE 'ABSENT' END;
END;"""
)
