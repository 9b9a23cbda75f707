"""Long records become several chunks (windows of the model's own wordpieces); search returns one
result per record, its best chunk; the write path works per record.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from oracle_rag.callers.caller import Caller
from oracle_rag.errors import ConfigurationError, InputError
from oracle_rag.sources import Document, Source
from oracle_rag.text.chunking import VOCAB_PATH, ChunkPlan, count_pieces

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "minilm-l6-reference"
MANAGER = Caller(1, "manager")


@pytest.fixture(scope="module")
def onnx_tokenizer() -> Any:
    """The model's own BertTokenizer op, alone (no truncation): the ground truth for counts."""
    import onnxruntime as ort

    from oracle_rag.embedding.build import make_tokenizer_model
    from oracle_rag.embedding.runtime import custom_ops_library_path

    options = ort.SessionOptions()
    options.register_custom_ops_library(custom_ops_library_path())
    model = make_tokenizer_model(max_length=1_000_000)
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    return lambda text: len(session.run(None, {name: [text]})[0]) - 2


def test_the_shipped_vocabulary_is_the_models() -> None:
    from oracle_rag.embedding.build import weights_dir

    shipped = VOCAB_PATH.read_bytes()
    assert shipped == (weights_dir() / "vocab.txt").read_bytes()
    assert hashlib.sha256(shipped).hexdigest() in (VOCAB_PATH.parent / "SOURCE.md").read_text("utf-8")


def test_wordpiece_counts_match_the_onnx_tokenizer(onnx_tokenizer) -> None:
    texts = [json.loads(line)["text"] for line in (FIXTURES / "texts.jsonl").read_text("utf-8").splitlines()]
    corpus = Path(__file__).resolve().parent.parent / "bench" / "data" / "cranfield" / "corpus.jsonl"
    for line in corpus.read_text("utf-8").splitlines()[:200]:
        row = json.loads(line)
        texts.append(row["title"] + " " + row["text"])
    texts += [
        "naïve café — déjà vu!",
        "x" * 150 + " tail",
        "CamelCaseIdentifier_with_underscores42",
        "中文字符 mixed",
    ]
    mismatched = [t[:50] for t in texts if count_pieces(t) != onnx_tokenizer(t)]
    assert not mismatched


words = st.text(
    alphabet=st.characters(min_codepoint=33, max_codepoint=0x24F, blacklist_categories=("Cs", "Cc", "Zs")),
    min_size=1,
    max_size=14,
)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(words, st.sampled_from([" ", "\n", "  ", "\n\n"])), min_size=1, max_size=400),
    st.integers(32, 254),
    st.integers(0, 127),
)
def test_windows_cover_the_text_in_order_within_the_window(parts, window, overlap) -> None:
    overlap = min(overlap, window // 2)
    text = "".join(w + s for w, s in parts)
    plan = ChunkPlan(window, overlap)
    chunks = plan.split(text)
    if count_pieces(text) <= window:
        assert chunks == [text]
        return
    assert len(chunks) > 1
    position = 0
    for chunk in chunks:
        found = text.find(chunk, max(0, position - len(chunk)))
        assert found >= 0  # each window is a slice of the text, in order
        assert count_pieces(chunk) <= window or len(chunk.split()) == 1
        position = found + len(chunk)
    words_in = text.split()
    covered = " ".join(chunks).split()
    assert set(words_in) <= set(covered)  # nothing lost
    assert text.rstrip().endswith(chunks[-1])


def test_plan_and_settings_are_validated(make_settings) -> None:
    for window, overlap in ((0, 0), (255, 10), (64, 33), (64, -1)):
        with pytest.raises(InputError):
            ChunkPlan(window, overlap)
    with pytest.raises(ConfigurationError, match="chunk_overlap"):
        make_settings(chunk_window=64, chunk_overlap=40)
    with pytest.raises(ConfigurationError, match="chunk_window"):
        make_settings(chunk_window=300)


# -- through the product ---------------------------------------------------------------------
class DocSource(Source):
    SOURCE_TYPE = "DOC"

    def __init__(self) -> None:
        self.docs: dict[str, tuple[str, int | None]] = {}

    def load_many(self, conn: sa.Connection, ids: Sequence[str]) -> dict[str, Document]:
        return {
            i: Document("DOC", i, self.docs[i][0], owner_id=self.docs[i][1], facets={"kind": "doc"})
            for i in ids
            if i in self.docs
        }

    def all_ids(self, conn: sa.Connection) -> list[str]:
        return list(self.docs)


@pytest.fixture
def docs(make_settings):
    from oracle_rag.system import RagSystem

    source = DocSource()
    system = RagSystem(make_settings(), sources=[source])
    system.migrate()
    yield system, source
    system.close()


FILLER = [
    "The quarterly planning meeting reviewed the roadmap for the mobile application and agreed to move the "
    "onboarding redesign into the next sprint, pending a review of the analytics dashboards.",
    "Customer support reported that response times improved after the new ticket routing rules were "
    "introduced, although weekend coverage remains thin and needs another volunteer rotation.",
    "The finance team asked every project lead to confirm the cloud budget for the coming year, including "
    "reserved capacity, storage growth and the cost of the staging environments.",
    "Design proposed a lighter colour palette for the settings pages and a consistent spacing scale, to be "
    "tested with five customers before any change ships to production.",
]
FACT = (
    "Finally, a note for the facilities group: the backup diesel generator at the Reykjavik data centre is "
    "serviced by Nordlys Power every second Tuesday, and its fuel tank holds 4,000 litres."
)


def _long_document() -> str:
    paragraphs = []
    i = 0
    while sum(len(p) + 2 for p in paragraphs) < 20_000:
        paragraphs.append(f"Section {i + 1}. " + FILLER[i % len(FILLER)] + f" (note {i})")
        i += 1
    return "\n\n".join(paragraphs + [FACT])


def _index(system: Any, ids: Sequence[str]) -> Any:
    with system.engine.begin() as conn:
        return system.indexer.apply(conn, [("DOC", i) for i in ids])


def test_a_20_kb_document_is_found_first_by_the_fact_in_its_last_paragraph(docs) -> None:
    system, source = docs
    long_text = _long_document()
    assert len(long_text.encode("utf-8")) > 20_000
    source.docs = {"long": (long_text, None)}
    # distractors: short documents about generators, data centres and servicing, without the fact
    source.docs |= {
        f"d{i}": (t, None)
        for i, t in enumerate(
            [
                "The office generator was replaced last year after a failed inspection.",
                "Our data centre in Frankfurt is audited every spring for power redundancy.",
                "Servicing schedules for the company cars are kept by the fleet manager.",
                "The Reykjavik office hosts the annual design offsite in September.",
                FILLER[0],
                FILLER[1],
            ]
        )
    }
    res = _index(system, list(source.docs))
    with system.engine.connect() as conn:
        chunks = conn.exec_driver_sql("SELECT COUNT(*) FROM RAG_CHUNK WHERE SOURCE_ID = 'long'").scalar_one()
    assert chunks > 10 and res.embedded == chunks + 6
    question = "Who services the backup generator at the Reykjavik data centre?"
    retriever = system.retriever()
    for mode in ("semantic", "keyword", "hybrid"):
        hits = retriever.search(question, 5, MANAGER, mode)
        assert len({h.source_id for h in hits}) == len(hits), mode  # one result per record
        found = next(h for h in hits if h.source_id == "long")
        assert "Nordlys Power" in found.content, mode  # the matching passage is the snippet
        assert found.facets == {"kind": "doc"}, mode
        # Semantic finds it first (its last chunk is the question's nearest). Keyword ranks whole
        # records by BM25, whose length normalisation weighs one paragraph of 20 KB less than a
        # one-line distractor sharing three words; hybrid fuses keyword with the records' first
        # windows (hybrid_semantic_chunk = FIRST, the RRF baseline's list), so here the keyword leg
        # carries it, with its passage.
        ranked = [h.source_id for h in hits]
        assert ranked.index("long") < {"semantic": 1, "hybrid": 5, "keyword": 5}[mode], (mode, ranked)
    # With NEAREST, hybrid fuses semantic mode's list: the last chunk lifts the record in both legs.
    from oracle_rag.system import RagSystem

    nearest = RagSystem(system.settings.with_overrides(hybrid_semantic_chunk="NEAREST"), sources=[source])
    try:
        ranked = [h.source_id for h in nearest.retriever().search(question, 5, MANAGER, "hybrid")]
    finally:
        nearest.close()
    assert ranked.index("long") < 3, ranked


def test_hash_skip_rescope_shrink_and_delete_work_per_record(docs) -> None:
    from writepath_helpers import instrument

    system, source = docs
    source.docs = {"long": (_long_document(), 5)}
    first = _index(system, ["long"])
    rt = instrument(system)
    again = _index(system, ["long"])
    assert (again.embedded, again.unchanged, rt.calls) == (0, 1, 0)
    source.docs["long"] = (source.docs["long"][0], 6)  # reassigned: same text
    moved = _index(system, ["long"])
    assert (moved.embedded, moved.rescoped, rt.calls) == (0, 1, 0)
    with system.engine.connect() as conn:
        owners = {
            r[0] for r in conn.exec_driver_sql("SELECT OWNER_ID FROM RAG_CHUNK WHERE SOURCE_ID = 'long'")
        }
    assert owners == {6}
    source.docs["long"] = ("now a short text", 6)
    shrunk = _index(system, ["long"])
    assert shrunk.embedded == 1 and rt.calls == 1 and first.embedded > 1
    with system.engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SELECT CHUNK_NO, CONTENT FROM RAG_CHUNK WHERE SOURCE_ID = 'long'"
        ).fetchall()
    assert [tuple(r) for r in rows] == [(0, "now a short text")]
    del source.docs["long"]
    assert _index(system, ["long"]).deleted == 1
