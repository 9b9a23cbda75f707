"""`oracle-rag eval`: trec_eval-compatible metrics, BEIR loading, and an end-to-end run."""

from __future__ import annotations

import hashlib
import json
import math
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from oracle_rag.cli import main
from oracle_rag.errors import InputError
from oracle_rag.evaluation import (
    DOCUMENT_TYPE,
    DocumentSource,
    document_text,
    load_dataset,
    ndcg_at_k,
    recall_at_k,
    run_eval,
    score_runs,
)

CRANFIELD = Path(__file__).resolve().parent.parent / "bench" / "data" / "cranfield"

# A graded toy query: four judged documents, a run that finds three of them
# with an unjudged one ("x") at rank 2. It reproduces the 0.690497 that the
# Cranfield SOURCE.md quotes for its toy cross-check.
TOY_QRELS = {"d1": 1, "d2": 2, "d3": 2, "d4": 3}
TOY_RUN = ["d2", "x", "d4", "d1"]


# -- metrics ----------------------------------------------------------------------
def test_ndcg_toy_by_hand():
    # DCG: grade / log2(rank + 1) for ranks 1..4 = 2/1 + 0 + 3/2 + 1/log2(5)
    dcg = 2.0 + 0.0 + 1.5 + 1 / math.log2(5)
    # Ideal: grades sorted 3, 2, 2, 1 at ranks 1..4 = 3/1 + 2/log2(3) + 2/2 + 1/log2(5)
    idcg = 3.0 + 2 / math.log2(3) + 1.0 + 1 / math.log2(5)
    assert dcg / idcg == pytest.approx(0.690497, abs=5e-7)
    assert ndcg_at_k(TOY_RUN, TOY_QRELS, 10) == pytest.approx(dcg / idcg, abs=1e-15)


def test_ndcg_cut_uses_ideal_from_all_judgements():
    # Cut at 2: DCG = 2/1 + 0; ideal = 3/1 + 2/log2(3) (from all four judgements, not the retrieved).
    assert ndcg_at_k(TOY_RUN, TOY_QRELS, 2) == pytest.approx(2.0 / (3.0 + 2 / math.log2(3)), abs=1e-15)
    assert ndcg_at_k(["d4", "d2", "d3", "d1"], TOY_QRELS, 10) == pytest.approx(1.0)
    assert ndcg_at_k([], TOY_QRELS, 10) == 0.0
    assert ndcg_at_k(["d1"], {}, 10) == 0.0  # no relevant documents


def test_ndcg_ignores_non_positive_grades_and_duplicates():
    qrels = {"a": 2, "b": 0, "c": -1}
    assert ndcg_at_k(["b", "c", "a"], qrels, 10) == pytest.approx(2 / math.log2(4) / 2)
    # A duplicate counts once, at its first rank; it does not push later ids down.
    assert ndcg_at_k(["b", "b", "a"], qrels, 10) == ndcg_at_k(["b", "a"], qrels, 10)


def test_recall_by_hand():
    assert recall_at_k(TOY_RUN, TOY_QRELS, 100) == pytest.approx(3 / 4)
    assert recall_at_k(TOY_RUN, TOY_QRELS, 2) == pytest.approx(1 / 4)
    assert recall_at_k(["d2", "d2", "d4"], TOY_QRELS, 2) == pytest.approx(2 / 4)
    assert recall_at_k(TOY_RUN, {"d1": 0}, 10) == 0.0


def test_metric_k_must_be_positive():
    with pytest.raises(InputError):
        ndcg_at_k(TOY_RUN, TOY_QRELS, 0)
    with pytest.raises(InputError):
        recall_at_k(TOY_RUN, TOY_QRELS, 0)


def test_score_runs_averages_over_queries():
    runs = {"q1": TOY_RUN, "q2": ["zz"]}
    qrels = {"q1": TOY_QRELS, "q2": {"d9": 1}}
    got = score_runs(runs, qrels)
    assert got["ndcg@10"] == pytest.approx((0.690497 + 0.0) / 2, abs=5e-7)
    assert got["recall@100"] == pytest.approx((0.75 + 0.0) / 2)
    with pytest.raises(InputError):
        score_runs({}, qrels)


# -- the vendored Cranfield copy ------------------------------------------------------
def test_cranfield_copy_matches_its_source_md():
    source = (CRANFIELD / "SOURCE.md").read_text(encoding="utf-8")
    stated = dict(re.findall(r"^\s*- (\S+\.(?:jsonl|tsv)): `([0-9a-f]{64})`", source, re.MULTILINE))
    assert set(stated) == {"corpus.jsonl", "queries.jsonl", "qrels.tsv"}
    for name, digest in stated.items():
        assert hashlib.sha256((CRANFIELD / name).read_bytes()).hexdigest() == digest, name
    assert "licence" in (CRANFIELD / "README.md").read_text(encoding="utf-8").lower()


def test_cranfield_loads_with_the_counts_source_md_states():
    data = load_dataset(CRANFIELD)
    assert len(data.documents) == 1400
    assert len(data.queries) == 225
    assert len(data.judged_queries) == 225
    assert sum(len(j) for j in data.qrels.values()) == 1612
    assert data.unknown_qrels == 0 and data.warnings == []
    assert data.documents["471"] == " "  # empty title and text, kept so the count stays 1400
    assert data.documents["1"].startswith("experimental investigation of the aerodynamics of a wing")
    assert (
        data.queries["3"] == "what problems of heat conduction in composite slabs have been solved so far ."
    )


# -- loading errors -----------------------------------------------------------------
def _write(folder: Path, corpus: list[object] | str, queries: list[object] | str, qrels: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, rows in (("corpus.jsonl", corpus), ("queries.jsonl", queries)):
        text = rows if isinstance(rows, str) else "".join(json.dumps(r) + "\n" for r in rows)
        (folder / name).write_text(text, encoding="utf-8")
    (folder / "qrels.tsv").write_text(qrels, encoding="utf-8")
    return folder


GOOD_CORPUS = [{"_id": "d1", "title": "Alpha", "text": "first"}, {"_id": "d2", "title": "", "text": "second"}]
GOOD_QUERIES = [{"_id": "q1", "text": "alpha"}, {"_id": "q2", "text": "beta"}]
GOOD_QRELS = "query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td2\t2\n"


def test_document_text_is_title_space_text():
    assert document_text("Alpha", "first") == "Alpha first"
    assert document_text("", "second") == "second"
    assert document_text("", "") == " "


def test_good_dataset_and_beir_qrels_subfolder(tmp_path):
    folder = _write(tmp_path / "ds", GOOD_CORPUS, GOOD_QUERIES, "")
    (folder / "qrels.tsv").unlink()
    (folder / "qrels").mkdir()
    (folder / "qrels" / "test.tsv").write_text(GOOD_QRELS, encoding="utf-8")
    data = load_dataset(folder)
    assert data.documents == {"d1": "Alpha first", "d2": "second"}
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2}}


@pytest.mark.parametrize(
    ("corpus", "queries", "qrels", "message"),
    [
        (
            '{"_id": "d1", "text": "ok"}\n\n{"_id": "d2", "text": broken}\n',
            GOOD_QUERIES,
            GOOD_QRELS,
            r"corpus\.jsonl:3: not valid JSON",
        ),
        (
            GOOD_CORPUS,
            '{"_id": "q1", "text": "a"}\n["not", "an", "object"]\n',
            GOOD_QRELS,
            r"queries\.jsonl:2: expected a JSON object",
        ),
        ([{"title": "no id"}], GOOD_QUERIES, GOOD_QRELS, r"corpus\.jsonl:1: missing field '_id'"),
        (GOOD_CORPUS, [{"_id": "q1"}], GOOD_QRELS, r"queries\.jsonl:1: missing field 'text'"),
        (
            GOOD_CORPUS + [{"_id": "d1", "text": "again"}],
            GOOD_QUERIES,
            GOOD_QRELS,
            r"corpus\.jsonl:3: duplicate _id 'd1'",
        ),
        (
            [{"_id": "d1", "text": 5}],
            GOOD_QUERIES,
            GOOD_QRELS,
            r"corpus\.jsonl:1: field 'text' must be a string",
        ),
        ([{"_id": "x" * 300, "text": "t"}], GOOD_QUERIES, GOOD_QRELS, r"corpus\.jsonl:1: _id must have"),
        (
            GOOD_CORPUS,
            GOOD_QUERIES,
            "query-id\tcorpus-id\tscore\nq1\td1\n",
            r"qrels\.tsv:2: expected 3 columns",
        ),
        (
            GOOD_CORPUS,
            GOOD_QUERIES,
            "q1\td1\t1\nq2\td2\thigh\n",
            r"qrels\.tsv:2: score 'high' is not an integer",
        ),
        (GOOD_CORPUS, GOOD_QUERIES, "q1\td1\t1\nq1\td1\t2\n", r"qrels\.tsv:2: duplicate judgement"),
        ([], GOOD_QUERIES, GOOD_QRELS, r"corpus\.jsonl: no documents"),
        (GOOD_CORPUS, GOOD_QUERIES, "q1\td1\t0\n", r"no loaded query has a positive judgement"),
    ],
)
def test_malformed_dataset_names_file_and_line(tmp_path, corpus, queries, qrels, message):
    folder = _write(tmp_path / "ds", corpus, queries, qrels)
    with pytest.raises(InputError, match=message):
        load_dataset(folder)


def test_missing_files_are_named(tmp_path):
    folder = _write(tmp_path / "ds", GOOD_CORPUS, GOOD_QUERIES, GOOD_QRELS)
    (folder / "qrels.tsv").unlink()
    with pytest.raises(InputError, match=r"qrels\.tsv: file not found \(nor qrels/test\.tsv\)"):
        load_dataset(folder)
    (folder / "queries.jsonl").unlink()
    with pytest.raises(InputError, match=r"queries\.jsonl: file not found"):
        load_dataset(folder)
    with pytest.raises(InputError, match="not a directory"):
        load_dataset(folder / "nope")


def test_non_utf8_is_named(tmp_path):
    folder = _write(tmp_path / "ds", GOOD_CORPUS, GOOD_QUERIES, GOOD_QRELS)
    (folder / "corpus.jsonl").write_bytes(b'{"_id": "d1", "text": "caf\xe9"}\n')
    with pytest.raises(InputError, match=r"corpus\.jsonl: not UTF-8"):
        load_dataset(folder)


def test_unknown_ids_in_qrels_are_counted_and_warned(tmp_path):
    qrels = GOOD_QRELS + "q1\tghost\t1\nq9\td1\t1\nq9\tghost\t3\n"
    data = load_dataset(_write(tmp_path / "ds", GOOD_CORPUS, GOOD_QUERIES, qrels))
    assert data.unknown_qrels == 3
    assert data.qrels == {"q1": {"d1": 1}, "q2": {"d2": 2}}
    assert data.warnings == [
        "qrels.tsv: 3 judgement(s) ignored: 1 query id(s) and 1 document id(s) not among the loaded ones"
    ]


def test_max_docs_and_max_queries_cut_in_file_order(tmp_path):
    data = load_dataset(
        _write(tmp_path / "ds", GOOD_CORPUS, GOOD_QUERIES, GOOD_QRELS), max_docs=1, max_queries=1
    )
    assert list(data.documents) == ["d1"] and list(data.queries) == ["q1"]
    assert data.unknown_qrels == 1
    with pytest.raises(InputError, match="max_docs must be a positive integer"):
        load_dataset(tmp_path / "ds", max_docs=0)


def test_document_source_serves_the_corpus():
    source = DocumentSource({"d1": "Alpha first", "d2": "second"})
    assert source.all_ids(None) == ["d1", "d2"]  # type: ignore[arg-type]
    docs = source.load_many(None, ["d2", "missing"])  # type: ignore[arg-type]
    assert list(docs) == ["d2"]
    doc = docs["d2"]
    assert (doc.source_type, doc.content, doc.owner_id, dict(doc.facets), source.indexed_facets()) == (
        DOCUMENT_TYPE,
        "second",
        None,
        {},
        (),
    )


# -- end to end -----------------------------------------------------------------------
TINY_TOPICS = [
    ("Sourdough bread", "A sourdough loaf rises with wild yeast and a long cold fermentation."),
    ("Volcanoes", "Basaltic lava flows from shield volcanoes such as those on Hawaii."),
    ("Chess openings", "The Sicilian Defence answers 1.e4 with c5 and leads to sharp positions."),
    ("Honey bees", "Worker bees collect nectar and pollen and make honey in the hive."),
    ("Jet engines", "A turbofan jet engine compresses air, burns fuel and drives a fan."),
    ("Tax returns", "File your income tax return before the April deadline to avoid penalties."),
    ("Marathon training", "Long slow runs build endurance for the 42 kilometre marathon race."),
    ("Photosynthesis", "Plants turn sunlight, water and carbon dioxide into glucose and oxygen."),
    ("Guitar chords", "A beginner learns the open chords G, C and D on an acoustic guitar."),
    ("Coral reefs", "Coral reefs bleach when warm ocean water stresses the algae they host."),
    ("Espresso", "An espresso shot pushes hot water through finely ground coffee at high pressure."),
    ("Black holes", "A black hole's event horizon traps light; nothing escapes its gravity."),
    ("Knitting", "Knitting a wool scarf needs two needles and the basic knit and purl stitches."),
    ("Bicycle repair", "Fix a flat bicycle tyre by patching the inner tube and pumping it up."),
    ("Python lists", "A Python list is a mutable sequence; append adds an item at the end."),
    ("Tea ceremony", "The Japanese tea ceremony prepares powdered matcha green tea with ritual."),
    ("Glaciers", "Glaciers carve valleys as the moving ice grinds rock over thousands of years."),
    ("Vaccines", "A vaccine trains the immune system to recognise a virus without disease."),
    ("Origami", "Origami folds a single square sheet of paper into a crane without cutting."),
    ("Solar panels", "Photovoltaic solar panels convert sunlight directly into electricity."),
]
TINY_QUERIES = [
    ("q1", "how do I make sourdough bread rise", {"1": 2}),
    ("q2", "which volcanoes have lava flows", {"2": 2}),
    ("q3", "how do jet engines burn fuel", {"5": 2}),
    ("q4", "turning sunlight into energy", {"8": 1, "20": 2}),
    ("q5", "coffee espresso pressure", {"11": 2}),
]


def _tiny_dataset(folder: Path, queries: list[tuple[str, str, dict[str, int]]] = TINY_QUERIES) -> Path:
    corpus = [{"_id": str(i), "title": t, "text": x} for i, (t, x) in enumerate(TINY_TOPICS, 1)]
    query_rows = [{"_id": q, "text": text} for q, text, _ in queries]
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(
        f"{q}\t{d}\t{g}\n" for q, _, judged in queries for d, g in judged.items()
    )
    return _write(folder, corpus, query_rows, qrels)


def _cli_env(data_dir: Path) -> dict[str, str]:
    return {"ORACLE_RAG_DATA_DIR": str(data_dir), "ORACLE_RAG_DATABASE_URL": "", "ORACLE_RAG_CONFIG": ""}


def test_eval_cli_end_to_end(tmp_path, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    dataset = _tiny_dataset(tmp_path / "tiny")
    out = tmp_path / "results" / "eval.json"
    result = CliRunner().invoke(
        main, ["eval", "--dataset", str(dataset), "--json", str(out)], env=_cli_env(data_dir)
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(report) == {"semantic", "keyword", "hybrid", "documents", "queries", "details"}
    assert (report["documents"], report["queries"]) == (20, 5)
    for mode in ("semantic", "keyword", "hybrid"):
        assert set(report[mode]) == {"ndcg@10", "recall@100"}
        assert 0.0 <= report[mode]["ndcg@10"] <= 1.0
        assert f"{mode:<9} nDCG@10 {report[mode]['ndcg@10']:.4f}" in result.output
    # 20 documents < 100: every visible document comes back in semantic (and so hybrid) mode,
    # so recall is exactly 1 there; each query shares a word with its relevant documents.
    assert report["semantic"]["recall@100"] == 1.0
    assert report["hybrid"]["recall@100"] == 1.0
    assert report["keyword"]["recall@100"] == 1.0
    # Unambiguous topics: the relevant document is at or near the top in every mode.
    assert report["semantic"]["ndcg@10"] > 0.8
    assert report["keyword"]["ndcg@10"] > 0.7
    assert report["hybrid"]["ndcg@10"] > 0.8
    assert report["details"]["engine"] == "sqlite"
    # Hybrid (hybrid_semantic_chunk = FIRST) is the plain RRF of the keyword and first-window runs.
    reference = report["details"]["rrf_reference"]
    assert set(reference) == {"keyword+semantic_first_window", "keyword+semantic_nearest_chunk"}
    assert report["hybrid"] == pytest.approx(reference["keyword+semantic_first_window"], abs=1e-12)
    assert set(report["details"]["semantic_first_window"]) == {"ndcg@10", "recall@100"}
    assert f"rrf       nDCG@10 {reference['keyword+semantic_first_window']['ndcg@10']:.4f}" in result.output
    # The scratch database lived elsewhere: the configured data directory holds only the model.
    assert not (data_dir / "oracle-rag.db").exists()
    assert sorted(p.name for p in data_dir.iterdir()) == ["models"]


def test_run_eval_library_with_limits_and_an_empty_query(tmp_path, make_settings):
    queries = TINY_QUERIES[:3] + [("qe", "   ", {"3": 1})] + TINY_QUERIES[3:]
    dataset = _tiny_dataset(tmp_path / "tiny", queries)
    seen: list[tuple[str, int, int]] = []
    report = run_eval(
        make_settings(),
        dataset,
        max_docs=10,
        max_queries=4,
        progress=lambda what, done, total: seen.append((what, done, total)),
    )
    # q1, q2, q3 and qe are judged on documents 1, 2, 5 and 3, all within the first 10.
    assert (report["documents"], report["queries"]) == (10, 4)
    assert report["details"]["unknown_qrels"] == 3  # the q4 and q5 judgements (3 pairs) were cut
    # The empty query is refused by the retriever: it scores 0 (trec_eval -c) and is listed.
    assert report["details"]["queries_refused"] == ["qe"]
    assert report["semantic"]["recall@100"] == pytest.approx(3 / 4)
    assert ("index", 10, 10) in seen
    assert [s for s in seen if s[0] == "hybrid"][-1] == ("hybrid", 4, 4)


def test_eval_cli_reports_a_malformed_dataset(tmp_path, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = _write(tmp_path / "bad", '{"_id": "d1"}\n{oops\n', GOOD_QUERIES, GOOD_QRELS)
    result = CliRunner().invoke(main, ["eval", "--dataset", str(folder)], env=_cli_env(data_dir))
    assert result.exit_code == 2
    assert "corpus.jsonl:2: not valid JSON" in result.output
