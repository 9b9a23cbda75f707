"""A second embedding model for the model-generation tests, and the processes the crash tests kill.

``minilm-rotated`` is all-MiniLM-L6-v2 with a fixed signed permutation of
its 384 outputs appended to the graph: its vectors are as good as MiniLM's
among themselves (cosines are unchanged), and useless against MiniLM's (a
query of one model against vectors of the other ranks nearly at random). So
a search that compared vectors of two generations would show at once, and
one that does not returns exactly the old generation's ranking. Built from
the data directory's MiniLM file in ~2 s; nothing downloaded.

``python tests/generation_helpers.py worker|switch|activate|rollback|drop``
runs one step in its own process with the model declared, for the crash tests.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
from pathlib import Path

import numpy as np

ROTATED_NAME = "minilm-rotated"
DIM = 384


def rotation() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(20261205)
    return rng.permutation(DIM).astype(np.int64), rng.choice([-1.0, 1.0], DIM).astype(np.float32)


def build_rotated(path: Path, progress: object = None) -> Path:
    """The MiniLM file next to ``path`` with Gather(permutation) * signs on its output."""
    import onnx
    from onnx import helper, numpy_helper

    from oracle_rag.embedding.build import DEFAULT_MODEL_FILENAME, OUTPUT_NAME, atomic_write

    model = onnx.load(str(path.parent / DEFAULT_MODEL_FILENAME))
    graph = model.graph
    inner = OUTPUT_NAME + "_unrotated"
    for node in graph.node:
        node.output[:] = [inner if o == OUTPUT_NAME else o for o in node.output]
        node.input[:] = [inner if i == OUTPUT_NAME else i for i in node.input]
    perm, signs = rotation()
    graph.initializer.extend(
        [numpy_helper.from_array(perm, "rotation_perm"), numpy_helper.from_array(signs, "rotation_signs")]
    )
    graph.node.extend(
        [
            helper.make_node("Gather", [inner, "rotation_perm"], ["rotated"], axis=-1),
            helper.make_node("Mul", ["rotated", "rotation_signs"], [OUTPUT_NAME]),
        ]
    )
    atomic_write(path, model.SerializeToString())
    return path


def register() -> None:
    from oracle_rag.embedding import catalog

    catalog.register(
        catalog.EmbeddingModel(
            name=ROTATED_NAME,
            title="all-MiniLM-L6-v2, outputs permuted (tests)",
            filename="minilm-rotated.onnx",
            dim=DIM,
            query_prefix="",
            passage_prefix="",
            source_package="",
            source_module="onnx",
            install="",
            languages="English",
            batched=False,
            builder=build_rotated,
            oracle_name="MINILM_ROTATED",
        )
    )


PREFIXED_NAME = "minilm-rotated-prefixed"


def register_prefixed() -> None:
    """``minilm-rotated`` (same file) declared with e5's prefixes: a generation whose model expects
    "query: " on a question and "passage: " on a text compared with one (as multilingual-e5-small does)."""
    from dataclasses import replace

    from oracle_rag.embedding import catalog

    register()
    catalog.register(
        replace(
            catalog.get(ROTATED_NAME), name=PREFIXED_NAME, query_prefix="query: ", passage_prefix="passage: "
        )
    )


def rotate(vec: np.ndarray) -> np.ndarray:
    perm, signs = rotation()
    return np.asarray(vec, dtype=np.float32)[..., perm] * signs


def _paused(step: str, call):  # noqa: ANN001, ANN202 - a test hook around an engine method
    """``call`` run, then this process stops until killed: the crash tests SIGKILL it exactly there."""

    def wrapped(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        result = call(*args, **kwargs)
        print(f"PAUSED {step}", flush=True)
        sys.stdin.readline()  # the parent kills us while we wait here
        return result

    return wrapped


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("step", choices=["worker", "switch", "activate", "rollback", "drop", "drain"])
    parser.add_argument("--data-dir", required=True)
    parser.add_argument("--name", default=ROTATED_NAME)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument(
        "--pause",
        choices=["load", "fill", "index", "flip"],
        default=None,
        help="stop (until killed) right after this step's work, before it commits",
    )
    parser.add_argument("--log", default=None, help="append a line per text the rotated model embeds")
    args = parser.parse_args(argv)
    register()
    from writepath_helpers import CountingRuntime

    from oracle_rag.config import load_settings
    from oracle_rag.indexing import model_switch
    from oracle_rag.system import RagSystem

    rag = RagSystem(
        load_settings(
            env={},
            data_dir=args.data_dir,
            batch_size=args.batch_size,
            worker_poll_ms=50,
            worker_initial_delay_ms=0,
            embedding_threads=1,
        )
    )
    engine = rag.engine
    if args.log:
        engine.set_runtime_for(
            ROTATED_NAME, CountingRuntime(engine.runtime_for(ROTATED_NAME), log_path=Path(args.log))
        )
    hooks = {
        "load": "load_generation_model",
        "fill": "embed_passages",
        "index": "build_vector_index",
        "flip": "active_generation",
    }
    if args.pause:
        setattr(engine, hooks[args.pause], _paused(args.pause, getattr(engine, hooks[args.pause])))
    print("STARTED", flush=True)
    if args.step == "worker":
        rag.worker().run(threading.Event(), initial_delay=False)
    elif args.step == "drain":
        print(rag.worker().drain())
    elif args.step == "switch":
        print(model_switch.switch(engine, rag.settings, args.name))
    elif args.step == "activate":
        print(model_switch.activate(engine, args.name))
    elif args.step == "rollback":
        print(model_switch.rollback(engine))
    else:
        print(model_switch.drop(engine, args.name))
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    main()
