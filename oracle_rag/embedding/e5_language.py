"""The English–Spanish direction removed from multilingual-e5-small's vectors: what it is, how it is derived.

Why. multilingual-e5-small puts a text and its translation close together,
but every vector also says which language its text is in: two unrelated
texts in the same language are a little closer than two unrelated texts in
different languages. Where records in both languages are searched together,
that small offset decides the ranking: a Spanish question finds Spanish
records about a neighbouring topic before the English records it asks about
(multilingual models are "weakly aligned"; see docs/embedding.md for the
measurements). Removing the component along which English and Spanish texts
differ, then normalising again, keeps what the text says and drops most of
which language says it.

The component is two directions, one per role: the mean difference between
the embeddings of an English sentence and of its Spanish translation, once
with the ``"passage: "`` prefix and once with ``"query: "`` (the prefix moves
the language offset too, and a question is compared with passages), made
orthonormal. They come from hand-written parallel sentences on general
topics (``oracle_rag/data/e5-language-pairs.tsv``), embedded by the graph
built without the removal, and are shipped as data
(``e5-language-directions.json``) so that a build needs no inference and
stays byte-for-byte deterministic. ``python -m
oracle_rag.embedding.e5_language_file`` derives them again and rewrites the
file (``--check`` compares); a test checks that the shipped directions are
the ones the pairs give.

Both engines run the removal inside the graph (:func:`.e5.encoder_pooling`),
so the embedded engine and Oracle's ``VECTOR_EMBEDDING`` agree.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from oracle_rag.errors import EmbeddingError

DATA = Path(__file__).resolve().parent.parent / "data"
PAIRS_PATH = DATA / "e5-language-pairs.tsv"
DIRECTIONS_PATH = DATA / "e5-language-directions.json"
ROLES = ("passage: ", "query: ")
"""The prefixes whose language offsets are removed, in the order of the directions."""
DIM = 384


def pairs(path: Path = PAIRS_PATH) -> list[tuple[str, str]]:
    """(English, Spanish) sentence pairs; lines starting with ``#`` are comments."""
    out: list[tuple[str, str]] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not all(p.strip() for p in parts):
            raise EmbeddingError(f"{path.name} line {number}: expected English<TAB>Spanish")
        out.append((parts[0], parts[1]))
    return out


def derive(embed: Callable[[str], np.ndarray], sentence_pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    """The directions as float32 ``[384, 2]`` with orthonormal columns, from a graph without the removal.

    Column ``i`` spans the mean (English - Spanish) difference under
    ``ROLES[i]``; the signs are fixed (QR with a positive diagonal of R), so the
    same vectors always give the same columns.
    """
    if not sentence_pairs:
        raise EmbeddingError("no sentence pairs to derive the language directions from")
    means = []
    for prefix in ROLES:
        diffs = [
            np.asarray(embed(prefix + en), dtype=np.float64)
            - np.asarray(embed(prefix + es), dtype=np.float64)
            for en, es in sentence_pairs
        ]
        means.append(np.mean(diffs, axis=0))
    q, r = np.linalg.qr(np.stack(means, axis=1))
    q = q * np.sign(np.diag(r))
    return q.astype(np.float32)


def directions(path: Path = DIRECTIONS_PATH) -> np.ndarray:
    """The shipped directions, float32 ``[384, 2]``."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        value = np.asarray(data["directions"], dtype=np.float32).T
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise EmbeddingError(f"cannot read the language directions {path.name}: {exc}") from None
    if value.shape != (DIM, len(ROLES)):
        raise EmbeddingError(
            f"{path.name} holds directions of shape {value.shape}, expected {(DIM, len(ROLES))}"
        )
    return np.ascontiguousarray(value)


def fingerprint(path: Path = DIRECTIONS_PATH) -> str:
    """sha256 of the directions file, recorded in the built model's metadata."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def render(value: np.ndarray, sentence_pairs: Sequence[tuple[str, str]]) -> str:
    """The JSON text of the directions file (each float32 written so that it reads back exactly)."""
    rows = [json.dumps([float(x) for x in column]) for column in np.asarray(value, dtype=np.float32).T]
    digest = hashlib.sha256("\n".join(f"{en}\t{es}" for en, es in sentence_pairs).encode()).hexdigest()
    head = json.dumps(
        {
            "model": "intfloat/multilingual-e5-small",
            "languages": ["en", "es"],
            "roles": list(ROLES),
            "pairs": len(sentence_pairs),
            "pairs_sha256": digest,
        }
    )
    return head[:-1] + ', "directions": [\n' + ",\n".join(rows) + "\n]}\n"
