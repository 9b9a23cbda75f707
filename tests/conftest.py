"""Shared pytest fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


# --- embedding model (oracle_rag.embedding) ---------------------------------
# One build per test session (~2 s, ~90 MB in a tmp dir). Set
# ORACLE_RAG_TEST_MODEL to an already built file to skip the build.
@pytest.fixture(scope="session")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Path of an augmented all-MiniLM-L6-v2 ONNX file, built once per session."""
    from oracle_rag.embedding import DEFAULT_MODEL_FILENAME, build_model

    preset = os.environ.get("ORACLE_RAG_TEST_MODEL")
    if preset:
        path = Path(preset)
        if not path.is_file():
            raise pytest.UsageError(f"ORACLE_RAG_TEST_MODEL={preset} does not exist")
        return path
    return build_model(tmp_path_factory.mktemp("embedding-model") / DEFAULT_MODEL_FILENAME)
