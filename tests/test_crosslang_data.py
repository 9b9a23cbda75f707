"""The cross-language set in bench/data/crosslang is what its generate.py derives, and is sound.

The set is generated from the demo's tasks and hand-written translations;
a change to the demo generator or to the translations must be followed by
regenerating the committed files, or the benchmark would measure a set that
no code describes.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from oracle_rag.demo.seed import ES_VERBS
from oracle_rag.evaluation import load_dataset

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "bench" / "data" / "crosslang"


def test_committed_files_are_what_the_generator_writes() -> None:
    done = subprocess.run(
        [sys.executable, str(DATA / "generate.py"), "--check"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_each_question_is_in_the_other_language_than_its_records() -> None:
    import json

    data = load_dataset(DATA)
    rows = [json.loads(line) for line in (DATA / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sum(r["language"] == "es" for r in rows) >= 60
    assert sum(r["language"] == "en" for r in rows) >= 60
    spanish_verbs = tuple(ES_VERBS)  # the demo generator writes Spanish titles with these verbs
    for row in rows:
        relevant = [d for d, g in data.qrels[row["_id"]].items() if g > 0]
        assert 1 <= len(relevant) <= 10  # Recall@10 can reach 1
        for doc in relevant:
            title = data.documents[doc].split("\n")[0]
            assert title.startswith(spanish_verbs) == (row["language"] == "en"), (row["text"], title)
