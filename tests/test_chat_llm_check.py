"""``oracle-rag llm check`` against the scripted OpenAI-protocol server (real HTTP, real CLI)."""

from __future__ import annotations

import json

from click.testing import CliRunner
from llm_server import Reply, ScriptedLLM

from oracle_rag.cli import main


def _check(tmp_path, llm: ScriptedLLM):
    cfg = tmp_path / "oracle-rag.toml"
    cfg.write_text(f'data_dir = "{tmp_path}"\nllm_url = "{llm.url}"\nllm_model = "tiny"\n')
    return CliRunner().invoke(main, ["--config", str(cfg), "llm", "check", "--json"])


def test_a_model_that_follows_the_format(tmp_path):
    with ScriptedLLM() as llm:
        llm.push(Reply(text="[TASK #101] waits for a certificate. [TASK #102] waits for finance."))
        result = _check(tmp_path, llm)
        assert llm.requests[0].body["stream"] is True and "<facts>" in llm.requests[0].last_user
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    assert body["model"] == "tiny" and body["follows_format"] is True
    assert (body["sentences"], body["removed"]) == (2, 0) and body["tokens"] > 0 and body["timeout_s"] == 300


def test_a_model_that_restates_counts_and_invents_records(tmp_path):
    with ScriptedLLM() as llm:
        llm.push(Reply(text="There are three blocked tasks. See [TASK #7] too."))
        result = _check(tmp_path, llm)
    body = json.loads(result.stdout)
    assert body["follows_format"] is False and (body["sentences"], body["removed"]) == (2, 2)


def test_without_a_model_it_says_how_to_configure_one(tmp_path):
    cfg = tmp_path / "oracle-rag.toml"
    cfg.write_text(f'data_dir = "{tmp_path}"\n')
    result = CliRunner().invoke(main, ["--config", str(cfg), "llm", "check"])
    assert result.exit_code != 0 and "ORACLE_RAG_LLM_URL" in result.output
