"""The PL/SQL that puts the embedding model into Oracle, once.

Both blocks do the same thing around a different load call:

1. look the model up in ``USER_MINING_MODELS`` *inside* the block, so a
   deploy that finds it does nothing (``SKIPPED``) and a re-run costs one
   query;
2. with ``:replace = 1``, drop it first (``DROP_ONNX_MODEL(force => TRUE)``);
3. load it; if the load fails and the model exists afterwards, another
   session loaded it between our check and our load (two deploys at once):
   that is success, reported as ``CONCURRENT``, not an error. Anything else
   is re-raised.

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

METADATA = '{"function":"embedding","embeddingOutput":"embedding","input":{"input":["DATA"]}}'

OUTCOMES = ("LOADED", "REPLACED", "SKIPPED", "CONCURRENT")


def _load_block(load_call: str) -> str:
    return f"""DECLARE
  c_name    CONSTANT VARCHAR2(128) := :model_name;
  c_replace CONSTANT BOOLEAN := (:replace = 1);
  l_found   PLS_INTEGER;
  l_outcome VARCHAR2(16);
BEGIN
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
        -- Another deploy may have loaded it since our check: then it is there, and that is success.
        SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name;
        IF l_found = 0 THEN
          RAISE;
        END IF;
        l_outcome := 'CONCURRENT';
    END;
  END IF;
  :outcome := l_outcome;
END;"""


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

ORACLE_STATEMENTS: dict[str, str] = {
    "LOAD_MODEL_BLOB": LOAD_MODEL_BLOB,
    "LOAD_MODEL_CLOUD": LOAD_MODEL_CLOUD,
}
