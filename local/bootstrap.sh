#!/usr/bin/env bash
# oracle-rag: bring an Oracle database up to date for the application.
#
# Runs `oracle-rag bootstrap`, which
#   1. applies pending migrations (ordered, recorded, safe to re-run);
#   2. if MINILM_ONNX_PAR_URL is set, loads the embedding model from that pre-authenticated
#      Object Storage URL (DBMS_VECTOR.LOAD_ONNX_MODEL_CLOUD with credential NULL), unless
#      USER_MINING_MODELS already has it (checked inside the PL/SQL block), so every deploy
#      after the first is a no-op.
#
# Works for Autonomous Database (the URL comes from `terraform output -raw
# minilm_onnx_par_url`, see terraform/README.md) and for a local Oracle Database Free, where
# you would normally load the file instead (local/README.md).
#
# Needs ORACLE_RAG_DATABASE_URL (no password in it) and ORACLE_RAG_DB_PASSWORD in the
# environment; ORACLE_RAG_EMBEDDING_MODEL names the model (default on Oracle:
# ALL_MINILM_L12_V2).
#
# A PAR URL is a bearer credential: whoever holds it can read the object until it expires.
# The command reads it from the environment, so it never appears on a command line (where
# `ps` would show it), and prints only its host. This script never prints it and never
# turns on tracing (set -x would echo it).
set -euo pipefail
set +x

ORACLE_RAG_BIN="${ORACLE_RAG_BIN:-oracle-rag}"

if [[ -z "${ORACLE_RAG_DATABASE_URL:-}" ]]; then
  echo "bootstrap: ORACLE_RAG_DATABASE_URL is not set (see docs/operations-oracle.md)" >&2
  exit 2
fi

if [[ -n "${MINILM_ONNX_PAR_URL:-}" && "${MINILM_ONNX_PAR_URL}" != https://* ]]; then
  echo "bootstrap: MINILM_ONNX_PAR_URL must be an https:// pre-authenticated request URL" >&2
  exit 2
fi

# MINILM_ONNX_PAR_URL stays in the environment; `oracle-rag bootstrap` reads it from there.
"${ORACLE_RAG_BIN}" bootstrap
echo "bootstrap: done"
