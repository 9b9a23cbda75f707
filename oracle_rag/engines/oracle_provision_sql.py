"""The PL/SQL that puts the embedding model into Oracle, once.

Both blocks do the same thing around a different load call:

1. take an exclusive user lock named for the model (``DBMS_LOCK.REQUEST``
   on an id hashed from ``ORACLE_RAG.MODEL.<name>``), so two deploys at
   once run check-and-load one after the other: the second waits, then
   finds the model and reports ``SKIPPED`` ("already loaded"), not an error;
2. look the model up in ``USER_MINING_MODELS`` *inside* the block, so a
   deploy that finds it does nothing (``SKIPPED``) and a re-run costs one
   query;
3. with ``:replace = 1``, drop it first (``DROP_ONNX_MODEL(force => TRUE)``);
4. load it; if the load fails and the model exists afterwards, a session
   that did not take the lock (an older oracle-rag, a DBA's script) loaded it
   meanwhile: that is success, reported as ``CONCURRENT``. Anything else is
   re-raised. The lock is released on every path (and with the session).

``DBMS_LOCK.REQUEST(id, lockmode, timeout, release_on_commit)`` returns 0
(granted), 1 (timeout), 2 (deadlock), 3 (parameter error), 4 (already held),
5 (illegal handle) (PL/SQL Packages and Types Reference, DBMS_LOCK). Ids
0..1073741823 are the user range; ``ALLOCATE_UNIQUE`` would give a named
lock but commits, so the id is ``DBMS_UTILITY.GET_HASH_VALUE`` of the name
in that range. ``release_on_commit => FALSE`` because the load may commit.
The application user needs ``EXECUTE ON DBMS_LOCK`` (not granted to PUBLIC).

Every value is a bind: the model name (``:model_name``, validated as an
identifier by :func:`oracle_rag.provision.model_identifier` and passed as a
string, never formatted in), the file bytes (``:model_data``, a BLOB) or the
pre-authenticated URL (``:uri``), the replace flag and the ``:outcome`` OUT
bind. The metadata is fixed: string input tensor ``input`` fed from the
``DATA`` attribute, output tensor ``embedding`` (what ``oracle-rag model
build`` writes, and Oracle's own default). ``tests/test_oracle_golden.py``
pins both blocks; ``sql/oracle/load_model.sql`` is the same logic for DBAs.
"""

from __future__ import annotations

from .statements import Sql

METADATA = '{"function":"embedding","embeddingOutput":"embedding","input":{"input":["DATA"]}}'

OUTCOMES = ("LOADED", "REPLACED", "SKIPPED", "CONCURRENT")


LOCK_WAIT_S = 900
"""How long a deploy waits for another one's model load (seconds) before it fails."""


def _load_block(load_call: str) -> Sql:
    return Sql(oracle=f"""DECLARE
  c_name    CONSTANT VARCHAR2(128) := :model_name;
  c_replace CONSTANT BOOLEAN := (:replace = 1);
  c_lock    CONSTANT INTEGER := DBMS_UTILITY.GET_HASH_VALUE('ORACLE_RAG.MODEL.' || c_name, 0, 1073741824);
  l_locked  INTEGER;
  l_found   PLS_INTEGER;
  l_outcome VARCHAR2(16);
BEGIN
  l_locked := DBMS_LOCK.REQUEST(id => c_lock, lockmode => DBMS_LOCK.X_MODE, timeout => {LOCK_WAIT_S},
                                release_on_commit => FALSE);
  IF l_locked NOT IN (0, 4) THEN
    RAISE_APPLICATION_ERROR(-20011, 'waiting for another session loading model ' || c_name
                                    || ': DBMS_LOCK.REQUEST returned ' || l_locked);
  END IF;
  SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name;
  IF l_found > 0 AND NOT c_replace THEN
    l_outcome := 'SKIPPED';
  ELSE
    IF l_found > 0 THEN
      DBMS_VECTOR.DROP_ONNX_MODEL(model_name => c_name, force => TRUE);
    END IF;
    BEGIN
{load_call}
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
  END IF;
  l_locked := DBMS_LOCK.RELEASE(id => c_lock);
  :outcome := l_outcome;
EXCEPTION
  WHEN OTHERS THEN
    l_locked := DBMS_LOCK.RELEASE(id => c_lock);
    RAISE;
END;""")


# A local file, sent by the client as a BLOB: no DIRECTORY object needed.
LOAD_MODEL_BLOB = _load_block(
    "      DBMS_VECTOR.LOAD_ONNX_MODEL(\n"
    "        model_name => c_name,\n"
    "        model_data => :model_data,\n"
    f"        metadata   => JSON('{METADATA}'));"
)

# A pre-authenticated Object Storage URL, fetched by the database itself.
# credential => NULL because the PAR URL is its own (bearer) credential.
LOAD_MODEL_CLOUD = _load_block(
    "      DBMS_VECTOR.LOAD_ONNX_MODEL_CLOUD(\n"
    "        model_name => c_name,\n"
    "        credential => NULL,\n"
    "        uri        => :uri,\n"
    f"        metadata   => JSON('{METADATA}'));"
)

# Drop a model only when USER_MINING_MODELS lists it. DROP_ONNX_MODEL's
# force => TRUE drops a model that is *invalid*; a missing one still raises
# ORA-40284 ("model does not exist"), which failed the test setup on a fresh
# database. Used by `provision.drop_model` (tests and operators).
DROP_MODEL = Sql(oracle="""DECLARE
  c_name  CONSTANT VARCHAR2(128) := :model_name;
  l_found PLS_INTEGER;
BEGIN
  SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name;
  IF l_found > 0 THEN
    DBMS_VECTOR.DROP_ONNX_MODEL(model_name => c_name, force => TRUE);
  END IF;
  :outcome := CASE WHEN l_found > 0 THEN 'DROPPED' ELSE 'ABSENT' END;
END;""")
