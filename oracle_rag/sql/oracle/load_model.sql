-- oracle-rag: load the ONNX embedding model, once. For DBAs (SQL*Plus or SQLcl).
--
-- NOT a migration (no V<n>__ prefix: `oracle-rag migrate` ignores this file). It is the
-- same logic as `oracle-rag model load` / `oracle-rag bootstrap`
-- (oracle_rag/engines/oracle_provision_sql.py): look the model up in USER_MINING_MODELS,
-- load it only when it is missing, and treat "another session loaded it meanwhile" as
-- success, so running it on every deploy is harmless.
--
-- Run it connected as the APPLICATION user (never SYS/SYSTEM), with four substitution
-- variables; leave the ones of the other variant empty:
--
--   from Object Storage (Autonomous Database), a pre-authenticated request URL:
--     DEFINE model_name = ALL_MINILM_L12_V2
--     DEFINE par_url    = https://objectstorage.<region>.oraclecloud.com/p/<token>/n/<ns>/b/<bucket>/o/<object>
--     DEFINE onnx_dir   = ''
--     DEFINE onnx_file  = ''
--     @load_model.sql
--
--   from a file on the database server, through a DIRECTORY object you may READ
--   (local/init/01_users.sh creates ONNX_MODELS for the local container):
--     DEFINE model_name = ALL_MINILM_L6_V2
--     DEFINE par_url    = ''
--     DEFINE onnx_dir   = ONNX_MODELS
--     DEFINE onnx_file  = all-MiniLM-L6-v2.onnx
--     @load_model.sql
--
-- The PAR URL is a bearer credential. SET VERIFY OFF stops SQL*Plus from printing the
-- lines with the substituted value, and the script prints only what it did. Do not put
-- the DEFINE for par_url in a file you commit.
--
-- The metadata is the default: string input tensor "input" fed from DATA, output tensor
-- "embedding" (what `oracle-rag model build` writes and Oracle's prebuilt models use).

SET DEFINE ON
SET VERIFY OFF
SET FEEDBACK OFF
SET SERVEROUTPUT ON
WHENEVER SQLERROR EXIT FAILURE

DECLARE
  c_name CONSTANT VARCHAR2(128)  := DBMS_ASSERT.SIMPLE_SQL_NAME(UPPER(TRIM('&model_name')));
  c_uri  CONSTANT VARCHAR2(4000) := TRIM('&par_url');
  c_dir  CONSTANT VARCHAR2(128)  := UPPER(TRIM('&onnx_dir'));
  c_file CONSTANT VARCHAR2(400)  := TRIM('&onnx_file');
  l_found PLS_INTEGER;
  l_task  VARCHAR2(32);
  e_no_table EXCEPTION;
  PRAGMA EXCEPTION_INIT(e_no_table, -942);

  -- The same lock as `oracle-rag model load` (oracle_provision_sql.py): a row lock on
  -- RAG_MAINTENANCE (TASK = 'MODEL_LOAD'), so deploys that run at once load the model one
  -- after the other. No grant needed (DBMS_LOCK needed one that SYSTEM and ADMIN cannot give).
  PROCEDURE ensure_lock_row IS
    PRAGMA AUTONOMOUS_TRANSACTION;
  BEGIN
    EXECUTE IMMEDIATE 'INSERT INTO RAG_MAINTENANCE (TASK, DONE_AT, CHUNKS) VALUES (''MODEL_LOAD'', SYSTIMESTAMP, 0)';
    COMMIT;
  EXCEPTION
    WHEN DUP_VAL_ON_INDEX THEN
      ROLLBACK;
  END;

  -- Creating a model commits: in its own transaction, so the row lock is kept until the end.
  PROCEDURE load IS
    PRAGMA AUTONOMOUS_TRANSACTION;
  BEGIN
    IF c_uri IS NOT NULL THEN
      DBMS_VECTOR.LOAD_ONNX_MODEL_CLOUD(
        model_name => c_name,
        credential => NULL,
        uri        => c_uri,
        metadata   => JSON('{"function":"embedding","embeddingOutput":"embedding","input":{"input":["DATA"]}}'));
    ELSIF c_dir IS NOT NULL AND c_file IS NOT NULL THEN
      DBMS_VECTOR.LOAD_ONNX_MODEL(
        directory  => c_dir,
        file_name  => c_file,
        model_name => c_name,
        metadata   => JSON('{"function":"embedding","embeddingOutput":"embedding","input":{"input":["DATA"]}}'));
    ELSE
      RAISE_APPLICATION_ERROR(-20001, 'define par_url, or onnx_dir and onnx_file');
    END IF;
    COMMIT;
  EXCEPTION
    WHEN OTHERS THEN
      ROLLBACK;
      RAISE;
  END;
BEGIN
  BEGIN
    ensure_lock_row;
    EXECUTE IMMEDIATE 'SELECT TASK FROM RAG_MAINTENANCE WHERE TASK = ''MODEL_LOAD'' FOR UPDATE WAIT 900'
      INTO l_task;
  EXCEPTION
    WHEN e_no_table THEN
      DBMS_OUTPUT.PUT_LINE('RAG_MAINTENANCE does not exist yet (run oracle-rag migrate): loading without the lock');
  END;
  SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name;
  IF l_found > 0 THEN
    DBMS_OUTPUT.PUT_LINE(c_name || ' already loaded; skipped');
  ELSE
    BEGIN
      load;
      IF c_uri IS NOT NULL THEN
        DBMS_OUTPUT.PUT_LINE('loaded ' || c_name || ' from the pre-authenticated URL');
      ELSE
        DBMS_OUTPUT.PUT_LINE('loaded ' || c_name || ' from ' || c_dir || '/' || c_file);
      END IF;
    EXCEPTION
      WHEN OTHERS THEN
        -- Another deploy may have loaded it since our check: then it is there, and that is success.
        SELECT COUNT(*) INTO l_found FROM USER_MINING_MODELS WHERE MODEL_NAME = c_name;
        IF l_found = 0 AND c_uri IS NOT NULL THEN
          -- Only the code: a DBMS_CLOUD message can quote the URL.
          RAISE_APPLICATION_ERROR(-20002, 'loading ' || c_name || ' from the pre-authenticated URL failed: ORA'
                                          || TO_CHAR(SQLCODE));
        ELSIF l_found = 0 THEN
          RAISE;
        END IF;
        DBMS_OUTPUT.PUT_LINE(c_name || ' was loaded by another session meanwhile; skipped');
    END;
  END IF;
  -- The row lock is released here (on a failure: when the transaction or the session ends).
  COMMIT;
END;
/
